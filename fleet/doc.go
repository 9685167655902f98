// Package fleet is the pifleet orchestrator SDK: a Go program uses it to
// spawn pi coding-agent workers (`pi --mode rpc`) on remote agents of a
// tailnet, prompt them, track their tasks, and review each finished task:
// accept it, or reject it with feedback that goes back into the same
// session; after more than review.maxRejects rejections (bundle manifest,
// default 3) the task is escalated to a human.
//
// Every worker instance follows one state machine, InstanceTable (seed
// state-flow §1 with the review cycle of §7); its documentation lists
// which frame or SDK call fires which event. RejectionEvent and
// ResolveMaxRejects decide where a rejection leads. The server's durable
// state (tasks and their review state, task_done delivery, the instance
// registry, trust decisions) lives in one bbolt file under its state
// directory.
package fleet
