// Package worker is the agent's layer over one pi worker: it starts pi
// under a shim (internal/shim), speaks pi's RPC protocol to it
// (transport/pirpc), and turns pi's stdout into the ordered events the
// daemon forwards, with what pi 0.73.1 does not give by itself: one
// settle per run, budgets, dialog handling, a safe stop, restart on the
// same session, re-adoption after an agent restart, and a model pin.
//
// # Processes
//
// Every worker runs as the child of a detached shim process (the agent
// binary's `shim` subcommand, Spec.ShimCommand) that holds pi's pipes and
// serves a unix socket in Spec.StateDir. The shim outlives the agent:
// Detach lets go of a worker without stopping it, and Adopt attaches
// again from the Persisted record (socket, token, last delivered seq),
// so a restarted agent resumes control of the same instance (DESIGN.md
// decision 6). A shim that is not there any more gives ErrGone: the
// daemon reports the instance lost with its session path.
//
// # Events
//
// Events delivers, in order: every pi record (responses to commands given
// to Send included, the worker's own get_state barriers and aborts
// excluded), one agent_settled per run (Event.Settled; synthetic for pi
// 0.73.1, pi's own for newer releases, a duplicate never forwarded), dialog
// requests (Event.UIRequest), model drift (Event.Drift) and finally the
// process's end (Event.Exit, with the stderr tail and whether a run was
// open). Event.Seq is the shim's line seq plus a base that grows at each
// Restart: increasing, not contiguous. A line is acknowledged to the shim
// once its event was taken from Events, so events not taken before an
// agent crash are delivered again to the adopting Worker (at least once;
// Persisted.LastSeq drops the ones the daemon recorded). Since replays the
// last Spec.RingSize events to a server that reconnects.
//
// # Settling, budgets, dialogs
//
// A run settles once pirpc.SettleDetector says so (an agent_end, then a
// get_state barrier with no retry or compaction in between). Settled
// carries the run's figures (pirpc.Tally), Aborted, the budget verdict and
// the outcomes of the dialogs since the previous settle.
//
// Budget.MaxCost (sum of the assistant messages' usage.cost.total,
// breached when strictly greater) and MaxTurns (breached when a turn
// starts after MaxTurns ended) count over the worker's life; MaxMinutes
// counts per run. A breach sends abort at once; every later settle reports
// BudgetExceeded for cost and turns, and a run started over budget is
// aborted at its start.
//
// A dialog (select, confirm, input, editor) is answered from
// Spec.AutoAnswer when a key matches ("method:title", then "title", then
// "method"), else it is an Event with UIRequest, answered by AnswerUI or,
// after Spec.DialogTimeout (or the dialog's own shorter timeout), given
// its safe default (confirm: false; others: cancelled) and reported as
// Escalated on the next Settled. A worker never waits on a dialog forever;
// dialogs still open at Detach get their safe default too.
//
// # Stopping
//
// Closing pi's stdin mid-run orphans the running tool (pi-rpc.md), so Stop
// aborts a busy worker first and waits for the run to settle, then closes
// stdin; a worker still alive after StopGrace gets SIGTERM on its whole
// process group (pi kills its tool trees on SIGTERM) and then SIGKILL:
// forced. The shim signals the group, never a bare pid that could have
// been reused. Stop returns once the Worker has let go of everything
// (Done): its goroutines ended and its shim reaped. Detach returns once
// its own goroutines ended, without waiting for any shim process.
//
// # Model pin
//
// With SetModelPin, Send refuses set_model and cycle_model
// (ErrModelPinned), and the get_state after each settle is compared with
// the pin: a difference is an Event with Drift, and the model is set back.
//
// # What the daemon does
//
// Read Events continuously (Stop and Restart need the stream to flow),
// store Persisted after Start, after each Settled and at Detach, turn an
// Exit with DuringRun into an aborted task (with Exit.StderrTail), forward
// UIRequests that are not AutoAnswered as ui_request, and call Detach (not
// Stop) on each worker when the agent shuts down without stopping work.
package worker
