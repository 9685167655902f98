// Package fleet is the pifleet orchestrator SDK: a Go program uses it to
// spawn pi coding-agent workers (`pi --mode rpc`) on remote agents of a
// tailnet, prompt them, track their tasks, and review each finished task:
// accept it, or reject it with feedback that goes back into the same
// session; after more than review.maxRejects rejections (bundle manifest,
// default 3) the task is escalated to a human.
//
// # Using it
//
// New builds a Fleet from options (state directory, bundle registry, the
// directory of agents — a static list and, with WithTailnet, the peers of
// `tailscale status` — whois, the trust prompter, a logger, timeouts); Start
// connects and Close tears everything down. Spawn starts a worker where
// its SpawnOptions say (agent, cwd, bundle), waiting for the agent's
// connection first (WaitAgent waits for that alone), and returns an
// *Instance: Prompt blocks until the worker settles and returns
// its final answer, PromptAsync does not wait, and Steer, FollowUp, Abort,
// Stop, Output, SetModel, SetTools, Rebundle and the file review calls
// (Diff, Read, List, Grep) act on it. Submit sends a tracked prompt and
// returns a *Task; the application hears of each task_done through
// WithTaskDone, then decides with Accept, Reject or, once escalated,
// Decide. Status and Subscribe show
// agents, instances and tasks as they change. The package's Example is the
// whole loop.
//
// # Task_done delivery: at least once, with a stable key
//
// The fleet hands every task_done to the WithTaskDone callback at least
// once, whenever the server process is killed (kill -9, power loss): a
// report the agent sent is recorded durably before the agent is told it
// arrived, and a recorded report is handed to the callback until the
// fleet has recorded that the callback returned. A report is handed out
// again only when the process ended between the callback's start and that
// record; the repeat comes after the restart, and is the same TaskReport
// with the same Key (TaskKey: instance, task and the agent's sequence
// number of the report). A clean Close never repeats one. An application
// that must act exactly once records TaskReport.Key in the same
// transaction as the effect of the report (or before returning, in a
// store that survives the crash) and skips a key it has recorded:
// ExampleWithTaskDone does. The server's kill campaign (README,
// "Reliability") counts this across hundreds of kills.
//
// # Sessions
//
// A worker's pi session file lives on its agent's disk; the agent is the
// source of truth and the fleet keeps a registry of every agent's sessions
// (ListSessions) that equals the agent's disk after every reconnect, with
// the server's own fields on top (bundle, gitHead, tasks, the attached
// instance). CreateBaseline primes a repository once; SpawnOptions.FromSession starts a task from a
// baseline in a clone of it named task:<taskId>:<slug>, leaving the
// baseline's bytes as they are; Resume continues any session as a clone or,
// unless it is pinned, attached. The entries of every session a worker
// writes are mirrored into the state directory (MirrorPath) after each
// settle, stop and reconnect, so entries written while the server was down
// arrive exactly once (CatchUp).
//
// # How it stays correct
//
// The fleet dials its agents through package dialer and records each
// connection in the connection machine of package transport; a lost agent
// makes its instances unreachable, and on reconnect the fleet lists the
// agent's instances, replays the events it missed and reconciles. Every
// worker instance follows one state machine, InstanceTable (with the
// review cycle); its documentation lists which
// frame or SDK call fires which event. RejectionEvent and ResolveMaxRejects
// decide where a rejection leads. The server's durable state (tasks and
// their review state, task_done delivery, the instance registry, trust
// decisions) lives in one bbolt file under its state directory.
package fleet
