package worker

import (
	"encoding/json"
	"time"

	"github.com/rs/zerolog"
)

// Defaults for the Spec fields left zero.
const (
	DefaultRingSize      = 4096
	DefaultStopGrace     = 5 * time.Second
	DefaultDialogTimeout = 5 * time.Minute
)

// Spec says what one worker runs and how it is supervised.
type Spec struct {
	// InstanceID names the worker ("i-" + 12 hex); it also names the shim's
	// socket and stays the same across Restart and Adopt.
	InstanceID string
	// Cwd is the worker's working directory.
	Cwd string
	// Command is the pi executable and its arguments, built by the daemon
	// (bundle resources as flags, model, session flags).
	Command []string
	// Env is the worker's complete environment (nil: the shim's).
	Env []string
	// StateDir is where the shim's socket and log live. It must outlive
	// the agent process (the shim does).
	StateDir string
	// ShimCommand runs the shim: the executable and the arguments that
	// select its entry point, e.g. {"/usr/bin/pifleet-agent", "shim"}.
	ShimCommand []string
	// RingSize is how many events Since can replay (default
	// DefaultRingSize).
	RingSize int
	// StopGrace is each wait of Stop: for the abort to end the run, for
	// the exit after stdin is closed, and between SIGTERM and SIGKILL
	// (default DefaultStopGrace).
	StopGrace time.Duration
	// Budget limits the worker; zero fields mean no limit.
	Budget Budget
	// DialogTimeout is how long a worker dialog waits for AnswerUI before
	// the safe default is sent (default DefaultDialogTimeout).
	DialogTimeout time.Duration
	// AutoAnswer answers dialogs without asking anyone (a bundle's
	// ui.autoAnswer). Keys are looked up in this order: "method:title",
	// "title", "method" (method is select, confirm, input or editor).
	// A confirm takes a bool (or "yes"/"no"); the others take a string;
	// a nil value cancels the dialog.
	AutoAnswer map[string]any
	// Log receives the worker's log (default: nothing).
	Log zerolog.Logger
	// OnLaunch, when set, is called before each shim process is started
	// (by Start, and by Restart for each new generation) with the handle
	// that finds and authenticates that shim. The daemon stores it there,
	// so that whatever happens to the daemon from then on, a restarted one
	// can re-adopt, or stop, the worker it may have started. An error
	// aborts the launch before any process starts.
	OnLaunch func(Persisted) error

	// For tests: how long an ack may wait at most (default
	// defaultAckHoldFor), and a function told of every ack sent.
	ackHoldFor time.Duration
	onAck      func(shimSeq uint64)
}

// Budget limits what a worker may spend. Cost and turns count over the
// worker's whole life (Restart included); minutes count per run.
type Budget struct {
	// MaxCost in dollars: breached when the sum of usage.cost.total of the
	// assistant messages is strictly greater.
	MaxCost float64
	// MaxTurns: breached when a turn starts after this many ended (the
	// extra turn is aborted at once).
	MaxTurns int
	// MaxMinutes: breached when one run lasts longer than this.
	MaxMinutes float64
}

// Persisted is what the daemon stores to re-adopt a worker after it
// restarted. Store it after Start, after each Settled, and at Detach;
// a stale copy only costs events delivered twice.
type Persisted struct {
	InstanceID string `json:"instanceId"`
	Socket     string `json:"socket"`
	Token      string `json:"token"`
	// LastSeq is the seq of the last event delivered by Events.
	LastSeq uint64 `json:"lastSeq"`
	// SeqBase is added to the shim's line seqs (it grows at each Restart,
	// so that event seqs keep increasing).
	SeqBase     uint64 `json:"seqBase"`
	SessionPath string `json:"sessionPath,omitempty"`
	Pid         int    `json:"pid,omitempty"`
	// RunOpen: a run had started and its Settled was not yet delivered.
	RunOpen bool `json:"runOpen,omitempty"`
}

// Event kinds that are not pi record types.
const (
	// KindResponse is a pi response to a command given to Send.
	KindResponse = "response"
	// KindSettled is the agent_settled event (synthetic or pi's own).
	KindSettled = "agent_settled"
	// KindExit is the end of the worker process (Event.Exit).
	KindExit = "exit"
	// KindDrift reports that the worker's model changed (Event.Drift).
	KindDrift = "model_drift"
	// KindGap reports stdout lines the shim lost while nobody read them.
	KindGap = "gap"
	// KindDialogEnded reports that a dialog ended without an answer
	// (Event.DialogEnded).
	KindDialogEnded = "dialog_ended"
)

// Event is one item of a worker's ordered stream.
type Event struct {
	// Seq increases along the stream (also across Restart); it is not
	// contiguous: lines the worker keeps to itself (answers to its own
	// get_state, say) leave holes. A DialogEnded event, which has no line
	// of its own, has the seq of the last line read before it: the event
	// before it may have the same.
	Seq uint64
	// Raw is the record to forward to the server as an event frame, nil
	// for Exit, Drift, DialogEnded and gaps. A synthetic agent_settled has Raw
	// {"type":"agent_settled","aborted":…}.
	Raw json.RawMessage
	// Kind is the record's type ("agent_start", "response", …) or one of
	// the Kind constants.
	Kind string
	// Settled is set on the one agent_settled event of each run.
	Settled *Settled
	// UIRequest is set on extension_ui_request events that open a dialog.
	UIRequest *UIRequest
	// Exit is set on the last event of a worker process.
	Exit *Exit
	// Drift is set when the model changed behind the daemon's back.
	Drift *Drift
	// DialogEnded is set when a dialog that waited for AnswerUI ended
	// without one: its time ran out (the worker's own timeout, or
	// DialogTimeout: the safe default was sent), or the process that
	// asked is gone (a Restart). Outcome is OutcomeTimedOut or
	// OutcomeCancelled.
	DialogEnded *DialogOutcome
}

// Settled is the end of one run.
type Settled struct {
	// Aborted: the run's last assistant message was aborted.
	Aborted bool
	// BudgetExceeded: the worker is over its budget (cost and turns stay
	// exceeded for the rest of its life; minutes for this run).
	BudgetExceeded bool
	// BudgetReason names the limit: "maxCost", "maxTurns" or "maxMinutes".
	BudgetReason string
	// Escalated: a dialog since the previous settle got no answer in time
	// and was given its safe default.
	Escalated bool
	// Dialogs are the outcomes of the dialogs since the previous settle.
	Dialogs []DialogOutcome
	// LastAssistantText is the text of the run's last assistant message.
	LastAssistantText string
	// Stats are this run's figures.
	Stats Stats
}

// Stats are the figures of one run.
type Stats struct {
	Turns        int
	ToolCalls    int
	Cost         float64
	FilesChanged int
}

// UIRequest is a worker dialog waiting for an answer (AnswerUI).
type UIRequest struct {
	RequestID string
	// Kind is the dialog method: select, confirm, input or editor.
	Kind        string
	Title       string
	Message     string
	Options     []string
	Placeholder string
	Prefill     string
	// Timeout is the worker's own timeout for the dialog (0: none).
	Timeout time.Duration
	// AutoAnswered: Spec.AutoAnswer answered it already; nobody needs to
	// be asked.
	AutoAnswered bool
}

// Dialog outcomes.
const (
	OutcomeAnswered  = "answered"
	OutcomeAuto      = "auto"
	OutcomeTimedOut  = "timed_out"
	OutcomeCancelled = "cancelled"
)

// DialogOutcome says how one dialog ended.
type DialogOutcome struct {
	RequestID string
	Kind      string
	Title     string
	// Outcome is one of the Outcome constants.
	Outcome string
}

// Exit says how a worker process ended.
type Exit struct {
	// Code is the exit code, -1 when a signal ended the worker or when it
	// is Lost.
	Code int
	// Signal names the signal that ended it ("KILL", "TERM", …).
	Signal string
	// StderrTail is the last 4,096 bytes of its stderr.
	StderrTail string
	// DuringRun: a run was open (its task is aborted).
	DuringRun bool
	// Lost: the shim vanished without reporting an exit; the worker is
	// gone with it (the shim's watchdog ends the process group).
	Lost bool
}

// Drift reports a model change seen in the get_state after a settle.
type Drift struct {
	From, To string // "provider/id"
	// Restored: the model is pinned and was set back to From.
	Restored bool
}

// State is where a worker stands.
type State string

// The worker states.
const (
	StateStarting State = "starting"
	StateIdle     State = "idle"
	StateRunning  State = "running"
	StateStopping State = "stopping"
	StateStopped  State = "stopped"
	StateExited   State = "exited"
	StateLost     State = "lost"
)

// Snapshot is a worker's current account of itself.
type Snapshot struct {
	InstanceID        string
	Pid               int
	State             State
	SessionPath       string
	Model             string // "provider/id"
	Cost              float64
	Turns             int
	ToolCalls         int
	Busy              bool
	LastAssistantText string
	// StderrTail is known once the process exited.
	StderrTail string
	// BudgetExceeded names the breached limit, "" when none.
	BudgetExceeded string
}
