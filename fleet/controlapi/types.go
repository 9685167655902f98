package controlapi

import (
	"encoding/json"
	"fmt"
	"time"
)

// APIVersion is the version in every path (/v1/…). An incompatible change
// gets a new prefix; fields are only ever added within a version.
const APIVersion = "v1"

// Status is a snapshot of the fleet (GET /v1/status).
type Status struct {
	Agents    []Agent    `json:"agents"`
	Instances []Instance `json:"instances"`
	Tasks     []Task     `json:"tasks"`
	// Baselines are the baseline sessions of every agent, stale ones
	// flagged.
	Baselines []Session `json:"baselines"`
}

// Agent is one agent of the directory.
type Agent struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses,omitempty"`
	// Source is static, tailnet, inbound or restored.
	Source string `json:"source,omitempty"`
	// State is the connection machine's state, e.g. connected,
	// unreachable.
	State    string `json:"state"`
	Machine  string `json:"machine,omitempty"`
	User     string `json:"user,omitempty"`
	Policy   string `json:"policy,omitempty"`
	Platform string `json:"platform,omitempty"`
	Version  string `json:"version,omitempty"`
	// MaxWorkers is the agent's capacity; absent: no limit, or an agent
	// that does not say.
	MaxWorkers int `json:"maxWorkers,omitempty"`
	// Addr is the address of the current (or last) connection.
	Addr        string     `json:"addr,omitempty"`
	ConnectedAt *time.Time `json:"connectedAt,omitempty"`
	LostAt      *time.Time `json:"lostAt,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
}

// ModelRef names a model: provider and id, optionally a thinking level.
type ModelRef struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	Thinking string `json:"thinking,omitempty"`
}

// String is "provider/id".
func (m ModelRef) String() string { return m.Provider + "/" + m.ID }

// ParseModelRef reads "provider/id" (the id may itself contain slashes).
func ParseModelRef(s string) (ModelRef, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if i == 0 || i == len(s)-1 {
				break
			}
			return ModelRef{Provider: s[:i], ID: s[i+1:]}, nil
		}
	}
	return ModelRef{}, &Error{Code: CodeBadRequest, Message: fmt.Sprintf("model %q is not provider/id", s)}
}

// Instance is one worker instance.
type Instance struct {
	ID         string    `json:"id"`
	Agent      string    `json:"agent"`
	Cwd        string    `json:"cwd"`
	State      string    `json:"state"`
	Bundle     string    `json:"bundle"`
	BundleHash string    `json:"bundleHash,omitempty"`
	Model      *ModelRef `json:"model,omitempty"`
	// ModelPinned: the worker's model is pinned (set_model and
	// cycle_model are refused; see model pin).
	ModelPinned bool `json:"modelPinned,omitempty"`
	// Degraded: the worker runs a cached bundle because the registry was
	// unavailable at spawn.
	Degraded bool   `json:"degraded,omitempty"`
	TraceID  string `json:"traceId,omitempty"`
	OpenTask string `json:"openTask,omitempty"`
	// Activity is what the worker did last (a tool name, writing, …).
	Activity   string     `json:"activity,omitempty"`
	ActivityAt *time.Time `json:"activityAt,omitempty"`
	Cost       float64    `json:"cost,omitempty"`
	// Turns counts the turns of the current (or last) run, and Budget
	// bounds each run; no budget means none.
	Turns     int         `json:"turns,omitempty"`
	Budget    *Budget     `json:"budget,omitempty"`
	EndReason string      `json:"endReason,omitempty"`
	PendingUI []UIRequest `json:"pendingUi,omitempty"`
	// Session is the path of the session file the worker writes.
	Session string `json:"session,omitempty"`
	// FromSession is the path of the session the worker started from (a
	// clone of it, or attached to it: SessionMode); StaleBaseline flags a
	// baseline whose repository had moved on when the worker was spawned.
	FromSession   string      `json:"fromSession,omitempty"`
	SessionMode   SessionMode `json:"sessionMode,omitempty"`
	StaleBaseline bool        `json:"staleBaseline,omitempty"`
}

// Budget bounds a worker's run: its cost, turns and minutes; an absent
// bound is none.
type Budget struct {
	MaxCost    *float64 `json:"maxCost,omitempty"`
	MaxTurns   *float64 `json:"maxTurns,omitempty"`
	MaxMinutes *float64 `json:"maxMinutes,omitempty"`
}

// UIRequest is a worker dialog waiting for an answer (POST
// /v1/ui/{request}).
type UIRequest struct {
	ID         string `json:"id"`
	InstanceID string `json:"instanceId"`
	// Kind is confirm, select or input.
	Kind    string    `json:"kind"`
	Title   string    `json:"title,omitempty"`
	Message string    `json:"message,omitempty"`
	Options []string  `json:"options,omitempty"`
	At      time.Time `json:"at,omitzero"`
	// Deadline is when pi answers the dialog itself (its own timeout);
	// absent when it waits for an answer.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// Task is a tracked task and its review.
type Task struct {
	ID         string `json:"id"`
	InstanceID string `json:"instanceId"`
	Agent      string `json:"agent,omitempty"`
	Prompt     string `json:"prompt,omitempty"`
	TraceID    string `json:"traceId,omitempty"`
	// State is running, awaiting_review, verifying, accepted, revising,
	// escalated, aborted, stopped or ended.
	State      string     `json:"state"`
	Rejects    int        `json:"rejects"`
	MaxRejects int        `json:"maxRejects"`
	Feedback   []Feedback `json:"feedback,omitempty"`
	LastDone   *TaskDone  `json:"lastDone,omitempty"`
	Verdict    string     `json:"verdict,omitempty"`
	// Branch and Base are an isolated task's branch and the commit it
	// started from; DiffStat the size of its change at its last end.
	Branch   string    `json:"branch,omitempty"`
	Base     string    `json:"base,omitempty"`
	DiffStat *DiffStat `json:"diffStat,omitempty"`
	// Delivery is how its work was delivered.
	Delivery *Delivery `json:"delivery,omitempty"`
}

// Feedback is one rejection of a task.
type Feedback struct {
	At   time.Time `json:"at,omitzero"`
	Text string    `json:"text"`
	By   string    `json:"by,omitempty"`
}

// TaskDone is the latest end of a task the agent reported.
type TaskDone struct {
	Seq int64 `json:"seq"`
	// Status is settled, budget_exceeded or aborted.
	Status               string `json:"status"`
	Summary              string `json:"summary,omitempty"`
	LastAssistantMessage string `json:"lastAssistantMessage,omitempty"`
}

// SessionMode says how a worker uses the session it starts from.
type SessionMode string

// Session modes.
const (
	// SessionClone (the default) starts the worker on a copy of the
	// session: the source's bytes never change.
	SessionClone SessionMode = "clone"
	// SessionAttach has the worker append to the session itself; refused
	// for a pinned session (a baseline) with session_pinned, and for one a
	// live worker writes with session_busy.
	SessionAttach SessionMode = "attach"
)

// Valid reports whether m is empty (clone) or one of the two modes.
func (m SessionMode) Valid() bool { return m == "" || m == SessionClone || m == SessionAttach }

// SpawnRequest is the body of POST /v1/instances.
type SpawnRequest struct {
	// Agent, Cwd and Bundle are required, unless FromSession is set: they
	// are then taken from the session's record when empty.
	Agent  string `json:"agent,omitempty"`
	Cwd    string `json:"cwd,omitempty"`
	Bundle string `json:"bundle,omitempty"`
	// PinnedHash makes the agent refuse any other version of the bundle.
	PinnedHash string `json:"pinnedHash,omitempty"`
	// Model overrides the bundle's model policy.
	Model *ModelRef `json:"model,omitempty"`
	// FromSession starts the worker on a session of the registry: its
	// path, its session id or its name (baseline:api; the newest of that
	// name). SessionMode says how (clone when empty).
	FromSession string            `json:"fromSession,omitempty"`
	SessionMode SessionMode       `json:"sessionMode,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	TraceID     string            `json:"traceId,omitempty"`
	// Isolation runs the worker in a git worktree of its own.
	Isolation *Isolation `json:"isolation,omitempty"`
}

func (r SpawnRequest) validate() error {
	switch {
	case !r.SessionMode.Valid():
		return badRequest("sessionMode %q is not clone or attach", r.SessionMode)
	case r.SessionMode != "" && r.FromSession == "":
		return badRequest("sessionMode %s needs a fromSession", r.SessionMode)
	case r.FromSession != "":
		return nil // the rest comes from the session's record
	case r.Agent == "":
		return badRequest("spawn needs an agent (or a fromSession)")
	case r.Cwd == "":
		return badRequest("spawn needs a cwd (or a fromSession)")
	case r.Bundle == "":
		return badRequest("spawn needs a bundle (or a fromSession)")
	}
	return nil
}

// SpawnProgress is one provisioning step of a spawn.
type SpawnProgress struct {
	// Phase is accepted, provisioning, degraded or starting.
	Phase        string `json:"phase"`
	Bundle       string `json:"bundle,omitempty"`
	BundleHash   string `json:"bundleHash,omitempty"`
	Message      string `json:"message,omitempty"`
	FilesTotal   int64  `json:"filesTotal,omitempty"`
	FilesFetched int64  `json:"filesFetched,omitempty"`
	FilesReused  int64  `json:"filesReused,omitempty"`
	BytesFetched int64  `json:"bytesFetched,omitempty"`
	BytesReused  int64  `json:"bytesReused,omitempty"`
}

// SpawnResult is the spawned instance (of a spawn or a resume).
type SpawnResult struct {
	InstanceID string `json:"instanceId"`
	TraceID    string `json:"traceId,omitempty"`
	// SessionPath is the session file the worker writes, when known.
	SessionPath string `json:"sessionPath,omitempty"`
	// FromSession is the path of the session the worker started from, and
	// SessionMode how; StaleBaseline flags a baseline whose repository's
	// HEAD has moved since it was primed (the worker runs on it anyway).
	FromSession   string      `json:"fromSession,omitempty"`
	SessionMode   SessionMode `json:"sessionMode,omitempty"`
	StaleBaseline bool        `json:"staleBaseline,omitempty"`
}

// SessionKind classifies a session by its name.
type SessionKind string

// Session kinds.
const (
	KindBaseline SessionKind = "baseline" // baseline:<repo>: a primed, pinned starting point
	KindTask     SessionKind = "task"     // task:<taskId>:<slug>: a clone working on one task
	KindScratch  SessionKind = "scratch"  // anything else
)

// Valid reports whether k is empty (any kind) or one of the three kinds.
func (k SessionKind) Valid() bool {
	return k == "" || k == KindBaseline || k == KindTask || k == KindScratch
}

// Session is one session of the registry: a pi session file on an agent's
// machine, with what the server knows of it.
type Session struct {
	Machine   string      `json:"machine"`
	SessionID string      `json:"sessionId"`
	Path      string      `json:"path"`
	Name      string      `json:"name,omitempty"`
	Cwd       string      `json:"cwd"`
	Kind      SessionKind `json:"kind"`
	// Pinned: the session's bytes never change (a baseline); it can be
	// resumed only as a clone.
	Pinned        bool     `json:"pinned"`
	ParentSession string   `json:"parentSession,omitempty"`
	Bundle        string   `json:"bundle,omitempty"`
	BundleHash    string   `json:"bundleHash,omitempty"`
	GitHead       string   `json:"gitHead,omitempty"`
	TaskIDs       []string `json:"taskIds,omitempty"`
	Labels        []string `json:"labels,omitempty"`
	// UpdatedAt is the file's last change as the agent reported it.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// AttachedInstanceID is the live worker writing the session.
	AttachedInstanceID string `json:"attachedInstanceId,omitempty"`
	// Registry is the reconciliation state of the machine's listing:
	// anything but synced means it may be out of date.
	Registry string `json:"registry,omitempty"`
	// StaleBaseline flags a baseline whose repository's HEAD (CurrentHead)
	// is no longer the GitHead it was primed on.
	StaleBaseline bool   `json:"staleBaseline,omitempty"`
	CurrentHead   string `json:"currentHead,omitempty"`
}

// SessionFilter selects sessions (GET /v1/sessions?machine=&kind=); empty
// fields match all.
type SessionFilter struct {
	Machine string
	Kind    SessionKind
}

// SessionSearch is a search of the sessions' contents (GET
// /v1/sessions/search?q=&machine=&cwd=).
type SessionSearch struct {
	Query string
	// Machine narrows the search to one agent; empty searches every
	// connected agent.
	Machine string
	// Cwd narrows it to the sessions of one working directory.
	Cwd string
}

// SessionHit is one session that matches a search.
type SessionHit struct {
	Machine   string `json:"machine"`
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Snippet   string `json:"snippet"`
}

// SearchFailure is an agent a search of every agent could not search.
type SearchFailure struct {
	Machine string `json:"machine"`
	Error   *Error `json:"error"`
}

// SearchResult answers a session search: the hits, grouped by machine in
// name order and in each agent's order within it, and the agents that
// could not be searched (only when no machine was named: a named one's
// failure is the answer's error).
type SearchResult struct {
	Hits   []SessionHit    `json:"hits"`
	Failed []SearchFailure `json:"failed,omitempty"`
}

// BaselineRequest is the body of POST /v1/baselines.
type BaselineRequest struct {
	Agent  string `json:"agent"`
	Cwd    string `json:"cwd"`
	Bundle string `json:"bundle"`
	// Prompt primes the worker (the server's default exploration prompt
	// when empty).
	Prompt string `json:"prompt,omitempty"`
	// Repo names the baseline baseline:<repo>; the base name of Cwd when
	// empty.
	Repo string `json:"repo,omitempty"`
	// SettleTimeoutSeconds bounds the priming run and
	// CompactTimeoutSeconds the compaction (the server's defaults when 0).
	SettleTimeoutSeconds  float64   `json:"settleTimeoutSeconds,omitempty"`
	CompactTimeoutSeconds float64   `json:"compactTimeoutSeconds,omitempty"`
	Model                 *ModelRef `json:"model,omitempty"`
	TraceID               string    `json:"traceId,omitempty"`
}

func (r BaselineRequest) validate() error {
	switch {
	case r.Agent == "":
		return badRequest("baseline needs an agent")
	case r.Cwd == "":
		return badRequest("baseline needs a cwd")
	case r.Bundle == "":
		return badRequest("baseline needs a bundle")
	case r.SettleTimeoutSeconds < 0 || r.CompactTimeoutSeconds < 0:
		return badRequest("baseline timeouts cannot be negative")
	}
	return nil
}

// Baseline is a primed, compacted, pinned session (the answer of POST
// /v1/baselines).
type Baseline struct {
	Machine string `json:"machine"`
	Cwd     string `json:"cwd"`
	// Name is baseline:<repo>.
	Name      string `json:"name"`
	Path      string `json:"path"`
	SessionID string `json:"sessionId,omitempty"`
	// GitHead is the repository's HEAD when it was primed; empty outside
	// a git repository (such a baseline is never stale).
	GitHead    string `json:"gitHead,omitempty"`
	Bundle     string `json:"bundle,omitempty"`
	BundleHash string `json:"bundleHash,omitempty"`
	// Compacted is false when pi found nothing to compact.
	Compacted bool `json:"compacted"`
	// Summary is the worker's answer to the priming prompt.
	Summary string `json:"summary,omitempty"`
}

// ResumeRequest is the body of POST /v1/sessions/resume: a worker started
// on a session of the registry, on the machine and in the directory where
// it lives.
type ResumeRequest struct {
	// Session is its path, its session id or its name.
	Session string `json:"session"`
	// Mode is clone (default) or attach.
	Mode SessionMode `json:"mode,omitempty"`
	// Machine narrows the lookup of the session; Bundle overrides the
	// bundle its record names.
	Machine string            `json:"machine,omitempty"`
	Bundle  string            `json:"bundle,omitempty"`
	Model   *ModelRef         `json:"model,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	TraceID string            `json:"traceId,omitempty"`
}

func (r ResumeRequest) validate() error {
	switch {
	case r.Session == "":
		return badRequest("resume needs a session")
	case !r.Mode.Valid():
		return badRequest("mode %q is not clone or attach", r.Mode)
	}
	return nil
}

// PromptRequest is the body of POST /v1/instances/{id}/prompt.
type PromptRequest struct {
	Text string `json:"text"`
	// Wait: answer only once the run settled, with the final assistant
	// message.
	Wait bool `json:"wait,omitempty"`
	// Task: send it as a tracked task (reviewed with accept/reject).
	Task bool `json:"task,omitempty"`
}

// PromptResult answers a prompt.
type PromptResult struct {
	// TaskID is set when the prompt was sent as a task.
	TaskID string `json:"taskId,omitempty"`
	// Reply is the final assistant message (with Wait).
	Reply string `json:"reply,omitempty"`
	// Settled is true when the call waited for the run to settle.
	Settled bool `json:"settled,omitempty"`
}

// ModelPinRequest pins (Pin true) or unpins a worker's model.
type ModelPinRequest struct {
	Pin bool `json:"pin"`
}

// ModelPin answers a ModelPinRequest: whether the model is now pinned, and
// which model that is (absent when the agent does not know it yet).
type ModelPin struct {
	InstanceID string    `json:"instanceId"`
	Pinned     bool      `json:"pinned"`
	Model      *ModelRef `json:"model,omitempty"`
}

// TextRequest is a body holding one text (steer).
type TextRequest struct {
	Text string `json:"text"`
}

// Output is what the server holds of a worker's output.
type Output struct {
	// Tail is the latest worker events, oldest first, verbatim.
	Tail []json.RawMessage `json:"tail"`
	// State is the latest get_state answer of pi, verbatim.
	State         json.RawMessage `json:"state,omitempty"`
	SnapshotAt    *time.Time      `json:"snapshotAt,omitempty"`
	LastAssistant string          `json:"lastAssistant,omitempty"`
}

// Transcript is the latest entries of an instance's session file (GET
// /v1/instances/{id}/transcript?limit=N), as the server mirrors them.
type Transcript struct {
	// Entries are pi session entries verbatim, oldest first.
	Entries []json.RawMessage `json:"entries"`
	// Truncated: older entries exist; ask with a larger limit.
	Truncated bool `json:"truncated"`
}

// Transcript limits: the default number of entries and the most one
// answer holds.
const (
	DefaultTranscriptLimit = 200
	MaxTranscriptLimit     = 5000
)

// Disposition says what happens to a worker after its task is accepted.
type Disposition string

// Dispositions.
const (
	DispositionStop     Disposition = "stop"
	DispositionKeepIdle Disposition = "keep_idle"
)

// AcceptRequest is the body of POST /v1/tasks/{id}/accept.
type AcceptRequest struct {
	// Disposition defaults to keep_idle.
	Disposition Disposition `json:"disposition,omitempty"`
	// Deliver (branch, patch, merge; none or empty: nothing) delivers an
	// isolated task's work before the accept, with Target and Message as
	// in DeliverRequest. A failed delivery fails the accept.
	Deliver string `json:"deliver,omitempty"`
	Target  string `json:"target,omitempty"`
	Message string `json:"message,omitempty"`
}

// RejectRequest is the body of POST /v1/tasks/{id}/reject.
type RejectRequest struct {
	Feedback string `json:"feedback"`
}

// RejectResult answers a rejection.
type RejectResult struct {
	// Escalated: the task exceeded review.maxRejects; a human decides.
	Escalated bool `json:"escalated"`
}

// Policy is a trust policy: allow (view and spawn), steer (everything),
// deny.
type Policy string

// Policies.
const (
	PolicyAllow Policy = "allow"
	PolicySteer Policy = "steer"
	PolicyDeny  Policy = "deny"
)

// Valid reports whether p is one of the three policies.
func (p Policy) Valid() bool { return p == PolicyAllow || p == PolicySteer || p == PolicyDeny }

// TrustDecision is a stored trust decision for a machine.
type TrustDecision struct {
	Machine string `json:"machine"`
	// User is the whois user the decision was made for ("" until the
	// machine's first connection after a trust set).
	User string `json:"user,omitempty"`
	// Key is the key the machine proved when it was decided (agents that
	// dial in); another key is a new first contact.
	Key       string    `json:"key,omitempty"`
	Policy    Policy    `json:"policy"`
	DecidedAt time.Time `json:"decidedAt,omitzero"`
}

// TrustSetRequest is the body of PUT /v1/trust/{machine}.
type TrustSetRequest struct {
	Policy Policy `json:"policy"`
}

// RebundleRequest is the body of POST /v1/instances/{id}/rebundle.
type RebundleRequest struct {
	Bundle string `json:"bundle"`
}

// RebundleResult answers a rebundle.
type RebundleResult struct {
	Bundle     string `json:"bundle"`
	BundleHash string `json:"bundleHash,omitempty"`
}

// ToolsRequest is the body of PUT /v1/instances/{id}/tools and its
// answer.
type ToolsRequest struct {
	Tools []string `json:"tools"`
}

// UIAnswerRequest is the body of POST /v1/ui/{request}: a JSON string,
// boolean or null.
type UIAnswerRequest struct {
	Value json.RawMessage `json:"value"`
}

// ChangeKind says what a Change reports.
type ChangeKind string

// Change kinds. They mirror the fleet's subscription; Dropped is the
// server's own: the stream lost Count changes because the reader was slow.
const (
	ChangeAgentState    ChangeKind = "agent_state"
	ChangeInstanceState ChangeKind = "instance_state"
	ChangeTaskState     ChangeKind = "task_state"
	ChangeEvent         ChangeKind = "event"
	ChangeTaskDone      ChangeKind = "task_done"
	ChangeEscalated     ChangeKind = "escalated"
	ChangeUIRequest     ChangeKind = "ui_request"
	ChangeUIEnded       ChangeKind = "ui_ended"
	ChangeSpawnProgress ChangeKind = "spawn_progress"
	ChangeModelDrift    ChangeKind = "model_drift"
	ChangeSessions      ChangeKind = "sessions"
	ChangeDropped       ChangeKind = "dropped"
)

// Change is one thing that happened in the fleet (GET /v1/watch).
type Change struct {
	// Seq numbers the changes of one stream from 1, in order.
	Seq        uint64     `json:"seq"`
	Kind       ChangeKind `json:"kind"`
	At         time.Time  `json:"at,omitzero"`
	Agent      string     `json:"agent,omitempty"`
	InstanceID string     `json:"instanceId,omitempty"`
	TaskID     string     `json:"taskId,omitempty"`
	// Event is the machine event, the spawn phase, or the worker event's
	// type.
	Event string `json:"event,omitempty"`
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	// Message is free text (an error, a drift description).
	Message string `json:"message,omitempty"`
	// Data is the kind's payload: the worker event verbatim (event), a
	// TaskDone (task_done), a UIRequest (ui_request; ui_ended: the dialog
	// that ended without an answer, Message saying how).
	Data json.RawMessage `json:"data,omitempty"`
	// Count is the number of lost changes (dropped).
	Count uint64 `json:"count,omitempty"`
	// Worker, which a backend may set on an event change instead of Data,
	// is the worker event as the backend holds it: the watch writes it out
	// only for a reader that needs it whole, and sends a reader that asked
	// for deltas a streamed update as its change to the event before it.
	// It is not part of the JSON; a client's Change has Data.
	Worker WorkerEvent `json:"-"`
}

// WorkerEvent is a worker event as a backend holds it: pifleet-server's
// adapter over fleet.Event implements it.
type WorkerEvent interface {
	// Raw returns the event's bytes, verbatim.
	Raw() json.RawMessage
	// DeltaAfter returns the event as a change to prev, the instance's
	// event before it: one entry of an event_delta frame's updates
	// (docs/protocol.md) that rebuilds the event from prev's bytes alone.
	// ok is false when the event is not such a change (it goes whole).
	DeltaAfter(prev WorkerEvent) (entry json.RawMessage, ok bool)
}

// CheckResult is the outcome of one doctor check.
type CheckResult string

// Check outcomes.
const (
	CheckPass CheckResult = "pass"
	CheckFail CheckResult = "fail"
	CheckSkip CheckResult = "skip"
)

// Check is one line of the doctor's report.
type Check struct {
	// Name says what was checked ("tailscale", "agent gpu-1", "registry").
	Name   string      `json:"name"`
	Result CheckResult `json:"result"`
	Detail string      `json:"detail,omitempty"`
}

// DoctorReport is the server's health report (GET /v1/doctor).
type DoctorReport struct {
	Checks []Check `json:"checks"`
}

// OK reports whether no check failed.
func (r DoctorReport) OK() bool {
	for _, c := range r.Checks {
		if c.Result == CheckFail {
			return false
		}
	}
	return true
}

// FileResult is an answer of an instance's file service: the diff, the
// file, the directory listing or the grep matches of the instance's cwd,
// read by the agent without asking the worker. The text is the worker's
// work: untrusted, shown with control characters removed.
type FileResult struct {
	// Text is the diff, the text file's lines, or the grep matches
	// ("path:line:text" lines); absent for a listing or a binary file.
	Text *string `json:"text,omitempty"`
	// Base64 and Mime carry a binary file that read returned (an image).
	Base64 string `json:"base64,omitempty"`
	Mime   string `json:"mime,omitempty"`
	// Entries is list's directory listing.
	Entries []FileEntry `json:"entries,omitempty"`
	// Truncated says the agent cut the answer at its size limit.
	Truncated bool `json:"truncated,omitempty"`
}

// FileEntry is one entry of a directory listing.
type FileEntry struct {
	Name string `json:"name"`
	// Kind is file or dir (symlinks are files).
	Kind string `json:"kind"`
	// Bytes is a file's size, when the agent reported it.
	Bytes *int64 `json:"bytes,omitempty"`
}

// DiffQuery asks for git diff in an instance's cwd: against Ref (default
// HEAD), of the index (Staged), as --stat (Stat).
type DiffQuery struct {
	Ref    string
	Staged bool
	Stat   bool
	// Base diffs an isolated worker's worktree against the commit its
	// branch started from, new files included.
	Base bool `json:",omitempty"`
}

// ReadQuery asks for a file of an instance's cwd; Offset (the first line,
// from 1) and Limit (how many lines) page a text file, 0 meaning the
// agent's defaults.
type ReadQuery struct {
	Path   string
	Offset int
	Limit  int
}

// GrepQuery searches an instance's cwd for Pattern (a regular expression)
// in files matching Glob (all files when empty).
type GrepQuery struct {
	Pattern string
	Glob    string
}
