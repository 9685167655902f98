// Package rebundle switches a running worker to another bundle on the same
// session ("/fleet-use B").
//
// The switch is the rebundle machine (Table): from running_old, sync
// bundle B (the same bundle-sync machine a spawn uses); when B is in the
// cache, reload the worker with B's resources (the agent restarts pi on
// the same session file, so the history is kept and only resources and
// tools change) and end in running_new; when the sync or the reload fails,
// pass through unchanged back to running_old: the worker keeps bundle A
// and the error is reported.
//
// The package decides nothing about processes: Switch takes the sync and
// the restart as functions, which the agent supplies.
package rebundle
