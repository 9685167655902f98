package controlapi

import (
	"context"
	"encoding/json"
)

// Backend is what the control API serves: the operations of a running
// fleet, in the API's own types. pifleet-server implements it with a thin
// adapter over the fleet SDK; the server side of this package only
// translates HTTP to these calls and back.
//
// Errors: a method returns an *Error (or wraps one) to give the client a
// precise code (unknown_instance, policy_refused, spawn_error, …); any
// other error reaches the client as code internal with its text.
//
// Every method may be called concurrently.
type Backend interface {
	// Status is a snapshot of agents, instances and tasks.
	Status(ctx context.Context) (Status, error)
	// Spawn starts a worker and returns once it is idle. progress, when
	// the agent reports provisioning steps, is called in order; it may be
	// called from another goroutine but never after Spawn returned.
	Spawn(ctx context.Context, req SpawnRequest, progress func(SpawnProgress)) (SpawnResult, error)
	// Prompt sends text to an instance: as a tracked task when req.Task,
	// and, when req.Wait, returns only once the run settled with the final
	// assistant message.
	Prompt(ctx context.Context, instanceID string, req PromptRequest) (PromptResult, error)
	// Steer queues a message delivered after the worker's current turn.
	Steer(ctx context.Context, instanceID, text string) error
	// Abort interrupts the instance's current run.
	Abort(ctx context.Context, instanceID string) error
	// Stop ends the instance's worker and waits until it stopped.
	Stop(ctx context.Context, instanceID string) error
	// Output is the instance's buffered tail and state snapshot.
	Output(ctx context.Context, instanceID string) (Output, error)
	// Tasks lists every tracked task.
	Tasks(ctx context.Context) ([]Task, error)
	// Accept accepts a task that awaits review.
	Accept(ctx context.Context, taskID string, d Disposition) error
	// Reject sends a task back with feedback; Escalated reports that the
	// rejection exceeded review.maxRejects and a human must decide.
	Reject(ctx context.Context, taskID, feedback string) (RejectResult, error)
	// Retry dials an agent now: one that trust refused (after its policy
	// changed), or one that is lost, without waiting for its backoff.
	Retry(ctx context.Context, agent string) error
	// TrustList lists the stored trust decisions.
	TrustList(ctx context.Context) ([]TrustDecision, error)
	// TrustSet records a trust decision for a machine.
	TrustSet(ctx context.Context, machine string, p Policy) (TrustDecision, error)
	// Watch streams changes until ctx is done: the channel is closed then
	// (or when the backend shuts down). Changes are delivered in the order
	// they happened; Seq is assigned by the server.
	Watch(ctx context.Context) (<-chan Change, error)
	// Transcript returns the last limit entries of the instance's
	// session file, oldest first (1 <= limit <= MaxTranscriptLimit).
	Transcript(ctx context.Context, instanceID string, limit int) (Transcript, error)
	// Diff runs git diff in the instance's cwd (error code file_error,
	// Detail the agent's code, e.g. not_a_repo).
	Diff(ctx context.Context, instanceID string, q DiffQuery) (FileResult, error)
	// ReadFile reads a file of the instance's cwd (file_error: not_found,
	// path_escape, …).
	ReadFile(ctx context.Context, instanceID string, q ReadQuery) (FileResult, error)
	// ListDir lists a directory of the instance's cwd ("" or "." for the
	// cwd itself).
	ListDir(ctx context.Context, instanceID, path string) (FileResult, error)
	// Grep searches the instance's cwd.
	Grep(ctx context.Context, instanceID string, q GrepQuery) (FileResult, error)
	// Rebundle switches a running instance to another bundle.
	Rebundle(ctx context.Context, instanceID, bundle string) (RebundleResult, error)
	// SetTools sets the worker's active tools and returns the tools now
	// active.
	SetTools(ctx context.Context, instanceID string, tools []string) ([]string, error)
	// SetModel switches the worker's model.
	SetModel(ctx context.Context, instanceID string, m ModelRef) error
	// PinModel pins (pin true) or unpins the worker's model.
	PinModel(ctx context.Context, instanceID string, pin bool) (ModelPin, error)
	// UIAnswer answers a pending worker dialog. value is a JSON string,
	// boolean, or null (cancel).
	UIAnswer(ctx context.Context, requestID string, value json.RawMessage) error
	// Doctor runs the server-side health checks.
	Doctor(ctx context.Context) (DoctorReport, error)

	// Sessions lists the sessions of the registry that match filter,
	// newest first, with the baselines' stale flags checked within ctx.
	Sessions(ctx context.Context, filter SessionFilter) ([]Session, error)
	// SearchSessions searches the contents of the agents' sessions: one
	// agent's when q.Machine is set, else every connected agent's (those
	// that fail are listed in Failed).
	SearchSessions(ctx context.Context, q SessionSearch) (SearchResult, error)
	// CreateBaseline primes, compacts and pins a baseline session; it
	// returns once the baseline is in the registry and its worker stopped.
	CreateBaseline(ctx context.Context, req BaselineRequest) (Baseline, error)
	// Resume starts a worker on a session of the registry (refusals:
	// unknown_session, session_pinned, session_busy). progress is as for
	// Spawn.
	Resume(ctx context.Context, req ResumeRequest, progress func(SpawnProgress)) (SpawnResult, error)

	ExecBackend
	WorktreeBackend
}
