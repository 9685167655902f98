// Package e2ekit keeps end-to-end tests that run pifleet agents from
// leaving worker processes behind.
//
// A pifleet agent runs each worker under a shim that outlives the agent
// by design (internal/shim): an agent killed with -9, or stopped with
// SIGTERM while its workers run, leaves them running, and so does a test
// that fails before it stopped what it spawned. CleanupWorkers registers a
// cleanup that finds every shim still serving in an agent's state
// directory, stops it, and fails the test for each one it had to stop, so
// that a leak stays visible but never outlives the test:
//
//	stateDir := t.TempDir()
//	e2ekit.CleanupWorkers(t, stateDir) // before the agent starts: runs after its cleanup
//	agent := startAgent(t, "--state-dir", stateDir)
//
// # What an agent records
//
// An agent keeps, under its state directory, workers/<id>.sock (one
// socket per shim; a restarted worker's generation n serves
// workers/<id>-<n>.sock), workers/<id>.shim.log (the shim's stderr: its
// log) and handles/<id>.json (the re-adoption handle: instance id, socket
// and token). Sweep first attaches to every shim a handle names, with the
// handle's token, and asks it to stop its worker (close stdin, then
// SIGTERM and SIGKILL to the process group after a grace), acknowledging
// the exit so that the shim ends. On Linux it then looks for any shim
// process whose log is in the state directory (one whose handle is gone,
// or never was written) and ends it with SIGTERM through a pidfd, so that
// no reused pid is ever signalled; the shim's watchdog takes the worker's
// process group down with it.
//
// # Faults
//
// On Linux the package also has what fault-injection tests share:
// SmallDisk and FillDisk give a test a disk of its own to fill (a tmpfs),
// and Descendants lists the processes below a pid by parent links, which
// BecomeSubreaper keeps true for the shims of a killed agent, so that a
// test counts what was left behind by the process tree, never by name.
package e2ekit
