// Package execplane is the agent's exec plane (reference 1.17): it runs a
// command on the agent's machine for the pinned server, streams its
// output, and reports how it ended. The agent enables it only with
// --exec-policy full.
//
// A Manager admits a start with the reference's checks, in order: the
// concurrency cap (default 4), the timeout (default 300 s, at most
// 3,600 s), the mode's required field (shell: command, argv: executable),
// the cwd (realpath'd; it must exist), and the configured roots. An
// execution tied to a worker (Request.InstanceRoot) must also run inside
// that worker's working tree. The pure decisions are decideStart and
// decideEnd; Manager and Execution carry them out.
//
// Each command runs in its own process group with stdin closed. Output is
// read from both pipes and sent as exec_output chunks of at most 48 KiB,
// numbered by one seq counter shared by both streams, to the owner only.
// An abort or a timeout sends SIGTERM to the group and SIGKILL 500 ms
// later; when the command exits, whatever it left running in its group is
// killed too, so no process outlives its execution. Every start and every
// exit is appended to a JSONL audit log that only the agent's user can
// read (0600); output never goes there.
package execplane
