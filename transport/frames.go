package transport

import "encoding/json"

// ProtocolVersion is the only version this package speaks: every frame
// carries "v":1.
const ProtocolVersion = 1

// MaxFrameBytes is the largest record the decoder accepts (excluding its LF,
// including a trailing CR) and the largest frame the encoder writes
// (including its LF).
const MaxFrameBytes = 1 << 20

// Header is the envelope every frame carries besides v and type.
type Header struct {
	// ID correlates a request with its response. Empty means none (an
	// empty id on the wire is treated as none, as the TS side does).
	ID string
	// TraceID follows one operation across machines; optional.
	TraceID string
}

// Envelope returns the header itself, so that every frame struct that
// embeds Header satisfies Frame's Envelope method.
func (h *Header) Envelope() *Header { return h }

// Frame is one protocol frame: a pointer to one of this package's frame
// structs (HelloFrame, SpawnFrame, EventFrame, …), each embedding Header.
// The set is closed: the codec knows how to check and write each of them.
type Frame interface {
	shape
	// FrameType returns the wire name, e.g. "spawn".
	FrameType() string
	// Envelope returns the frame's id and traceId.
	Envelope() *Header
}

// Wire names of the v1 frame types.
const (
	TypeHello          = "hello"
	TypeHeartbeat      = "heartbeat"
	TypeError          = "error"
	TypeSpawn          = "spawn"
	TypeSpawned        = "spawned"
	TypeSpawnError     = "spawn_error"
	TypeStop           = "stop"
	TypeStopped        = "stopped"
	TypeList           = "list"
	TypeInstances      = "instances"
	TypeRPC            = "rpc"
	TypeEvent          = "event"
	TypeTaskDone       = "task_done"
	TypeTaskDoneAck    = "task_done_ack"
	TypeTaskAccept     = "task_accept"
	TypeTaskReject     = "task_reject"
	TypeDeliver        = "deliver"
	TypeDelivered      = "delivered"
	TypeUIRequest      = "ui_request"
	TypeUIResponse     = "ui_response"
	TypeSessionsReport = "sessions_report"
	TypeSessionSearch  = "session_search"
	TypeSessionHits    = "session_hits"
	TypeExecStart      = "exec_start"
	TypeExecStarted    = "exec_started"
	TypeExecOutput     = "exec_output"
	TypeExecExit       = "exec_exit"
	TypeExecAbort      = "exec_abort"
	TypeExecAborted    = "exec_aborted"
	TypeExecList       = "exec_list"
	TypeExecInstances  = "exec_instances"
	TypeFsRead         = "fs_read"
	TypeFsList         = "fs_list"
	TypeFsGrep         = "fs_grep"
	TypeFsDiff         = "fs_diff"
	TypeFsResult       = "fs_result"
)

// Role is the role a hello announces.
type Role string

// Roles.
const (
	RoleServer Role = "server"
	RoleAgent  Role = "agent"
)

// HelloFrame (A→S, once per connection) introduces the agent.
type HelloFrame struct {
	Header
	Machine        string
	Role           Role
	PackageVersion string
	// Platform uses Node's names: linux, darwin, win32.
	Platform        string
	AvailableModels []ModelRef
	// Capabilities lists optional features, e.g. "exec-v1".
	Capabilities []string
	// Challenge is the sender's fresh random nonce (pifleet addition, see
	// transport/auth): the peer's proof must cover it.
	Challenge string
	// Proofs are a server's signatures over the connection's transcript,
	// one per key it holds (pifleet addition).
	Proofs []KeyProof
	// Proxied is an agent's word that it is reached through a TCP proxy
	// or NAT, so that the proofs cannot cover the TCP endpoints (pifleet
	// addition).
	Proxied bool
	// MaxWorkers is an agent's capacity: how many workers it runs at
	// most (its max_workers refusals count against it); absent when it
	// sets no limit (pifleet addition).
	MaxWorkers *float64
}

// FrameType returns "hello".
func (*HelloFrame) FrameType() string { return TypeHello }

// schema lists hello's fields.
func (f *HelloFrame) schema(s *schema) {
	s.String("machine", &f.Machine, required)
	enum(s, "role", &f.Role, required, RoleServer, RoleAgent)
	s.String("packageVersion", &f.PackageVersion, required)
	s.String("platform", &f.Platform, required)
	structsField(s, "availableModels", &f.AvailableModels, optional)
	s.Strings("capabilities", &f.Capabilities, optional)
	s.String("challenge", &f.Challenge, optional)
	structsField(s, "proofs", &f.Proofs, optional)
	s.Bool("proxied", &f.Proxied, optional)
	s.OptNumber("maxWorkers", &f.MaxWorkers)
}

// HeartbeatFrame (both ways, every 15 s) keeps the connection alive. Conn
// sends and swallows them itself.
type HeartbeatFrame struct{ Header }

// FrameType returns "heartbeat".
func (*HeartbeatFrame) FrameType() string { return TypeHeartbeat }

// schema: heartbeat has no fields.
func (*HeartbeatFrame) schema(*schema) {}

// ErrorFrame (both ways) reports a protocol or dispatch error. It is never
// answered with another error frame.
type ErrorFrame struct {
	Header
	Code    string
	Message string
}

// FrameType returns "error".
func (*ErrorFrame) FrameType() string { return TypeError }

// schema lists error's fields.
func (f *ErrorFrame) schema(s *schema) {
	s.String("code", &f.Code, required)
	s.String("message", &f.Message, required)
}

// SpawnFrame (S→A) starts a worker.
type SpawnFrame struct {
	Header
	Cwd         string
	Bundle      string
	BundleHash  string
	FromSession string
	// SessionMode (pifleet addition) says what to do with FromSession:
	// clone it at once (the default, "") or attach to it, appending to
	// the file itself. A TypeScript agent ignores it and clones.
	SessionMode SessionMode
	Model       *ModelRef
	Env         map[string]string
	Budget      *Budget
	// Isolation (pifleet addition) runs the worker in a git worktree of
	// its own. A TypeScript agent ignores it, so a pifleet server sends it
	// only to an agent announcing CapabilityWorktree.
	Isolation *Isolation
}

// FrameType returns "spawn".
func (*SpawnFrame) FrameType() string { return TypeSpawn }

// schema lists spawn's fields.
func (f *SpawnFrame) schema(s *schema) {
	s.String("cwd", &f.Cwd, required)
	s.String("bundle", &f.Bundle, required)
	s.String("bundleHash", &f.BundleHash, optional)
	s.String("fromSession", &f.FromSession, optional)
	enum(s, "sessionMode", &f.SessionMode, optional, SessionClone, SessionAttach)
	optStructField(s, "model", &f.Model)
	s.StringMap("env", &f.Env, optional)
	optStructField(s, "budget", &f.Budget)
	optStructField(s, "isolation", &f.Isolation)
}

// SpawnedFrame (A→S) answers spawn with the new instance.
type SpawnedFrame struct {
	Header
	Instance InstanceInfo
}

// FrameType returns "spawned".
func (*SpawnedFrame) FrameType() string { return TypeSpawned }

// schema lists spawned's fields.
func (f *SpawnedFrame) schema(s *schema) {
	structField(s, "instance", &f.Instance)
}

// SpawnErrorFrame (A→S) answers spawn when no worker was started.
type SpawnErrorFrame struct {
	Header
	Code    string
	Message string
}

// FrameType returns "spawn_error".
func (*SpawnErrorFrame) FrameType() string { return TypeSpawnError }

// schema lists spawn_error's fields.
func (f *SpawnErrorFrame) schema(s *schema) {
	s.String("code", &f.Code, required)
	s.String("message", &f.Message, required)
}

// StopFrame (S→A) stops a worker.
type StopFrame struct {
	Header
	InstanceID string
}

// FrameType returns "stop".
func (*StopFrame) FrameType() string { return TypeStop }

// schema lists stop's fields.
func (f *StopFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
}

// StoppedFrame (A→S) answers stop.
type StoppedFrame struct {
	Header
	InstanceID  string
	Forced      bool
	SessionPath string
}

// FrameType returns "stopped".
func (*StoppedFrame) FrameType() string { return TypeStopped }

// schema lists stopped's fields.
func (f *StoppedFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Bool("forced", &f.Forced, required)
	s.String("sessionPath", &f.SessionPath, optional)
}

// ListFrame (S→A) asks for the agent's instances.
type ListFrame struct{ Header }

// FrameType returns "list".
func (*ListFrame) FrameType() string { return TypeList }

// schema: list has no fields.
func (*ListFrame) schema(*schema) {}

// InstancesFrame (A→S) answers list.
type InstancesFrame struct {
	Header
	Instances []InstanceInfo
}

// FrameType returns "instances".
func (*InstancesFrame) FrameType() string { return TypeInstances }

// schema lists instances's fields.
func (f *InstancesFrame) schema(s *schema) {
	structsField(s, "instances", &f.Instances, required)
}

// RPCFrame (S→A) sends one pi RPC command to a worker's stdin.
type RPCFrame struct {
	Header
	InstanceID string
	// Command is written verbatim to the worker; the key is always present
	// on the wire (null when nil).
	Command json.RawMessage
	// TaskID, when set, makes the command the start of a tracked task.
	TaskID string
}

// FrameType returns "rpc".
func (*RPCFrame) FrameType() string { return TypeRPC }

// schema lists rpc's fields.
func (f *RPCFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Raw("command", &f.Command, required)
	s.String("taskId", &f.TaskID, optional)
}

// EventFrame (A→S) carries one JSON line of a worker's stdout.
type EventFrame struct {
	Header
	InstanceID string
	// Event is the worker's line, verbatim; the key is always present on
	// the wire (null when nil).
	Event json.RawMessage
	// Seq is the event's position in its worker's stream (a pifleet
	// addition, docs/protocol.md): a server that reconnects asks for the
	// events after the last seq it saw. Absent from a TypeScript agent.
	Seq *float64
}

// FrameType returns "event".
func (*EventFrame) FrameType() string { return TypeEvent }

// schema lists event's fields.
func (f *EventFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Raw("event", &f.Event, required)
	s.OptNumber("seq", &f.Seq)
}

// TaskStatus is how a task ended.
type TaskStatus string

// Task statuses.
const (
	TaskSettled        TaskStatus = "settled"
	TaskBudgetExceeded TaskStatus = "budget_exceeded"
	TaskAborted        TaskStatus = "aborted"
)

// TaskDoneFrame (A→S) reports a finished task; it is replayed from the
// agent's outbox until acknowledged.
type TaskDoneFrame struct {
	Header
	TaskID     string
	InstanceID string
	// Seq identifies this report; the ack must echo it exactly.
	Seq                  float64
	Status               TaskStatus
	Summary              string
	LastAssistantMessage string
	Stats                *TaskStats
	// Worktree (pifleet addition) is the isolated worker's branch, base
	// and the size of its changes at the end of the task.
	Worktree *WorktreeStat
}

// FrameType returns "task_done".
func (*TaskDoneFrame) FrameType() string { return TypeTaskDone }

// schema lists task_done's fields.
func (f *TaskDoneFrame) schema(s *schema) {
	s.String("taskId", &f.TaskID, required)
	s.String("instanceId", &f.InstanceID, required)
	s.Number("seq", &f.Seq)
	enum(s, "status", &f.Status, required, TaskSettled, TaskBudgetExceeded, TaskAborted)
	s.String("summary", &f.Summary, required)
	s.String("lastAssistantMessage", &f.LastAssistantMessage, optional)
	optStructField(s, "stats", &f.Stats)
	optStructField(s, "worktree", &f.Worktree)
}

// TaskDoneAckFrame (S→A) acknowledges a task_done.
type TaskDoneAckFrame struct {
	Header
	TaskID string
	Seq    float64
}

// FrameType returns "task_done_ack".
func (*TaskDoneAckFrame) FrameType() string { return TypeTaskDoneAck }

// schema lists task_done_ack's fields.
func (f *TaskDoneAckFrame) schema(s *schema) {
	s.String("taskId", &f.TaskID, required)
	s.Number("seq", &f.Seq)
}

// Disposition says what happens to a worker after its task is accepted.
type Disposition string

// Dispositions.
const (
	DispositionStop     Disposition = "stop"
	DispositionKeepIdle Disposition = "keep_idle"
)

// DeliveryMode says how a task's result is delivered.
type DeliveryMode string

// Delivery modes. DeliverNone is valid only in task_accept.
const (
	DeliverBranch DeliveryMode = "branch"
	DeliverPR     DeliveryMode = "pr"
	DeliverPatch  DeliveryMode = "patch"
	DeliverNone   DeliveryMode = "none"
	// DeliverMerge (pifleet addition) merges the worker's branch into a
	// target branch.
	DeliverMerge DeliveryMode = "merge"
)

// TaskAcceptFrame (S→A) accepts a task's result.
type TaskAcceptFrame struct {
	Header
	TaskID      string
	Disposition Disposition
	Deliver     DeliveryMode
	// Target and Message (pifleet additions) are as in DeliverFrame.
	Target, Message string
}

// FrameType returns "task_accept".
func (*TaskAcceptFrame) FrameType() string { return TypeTaskAccept }

// schema lists task_accept's fields.
func (f *TaskAcceptFrame) schema(s *schema) {
	s.String("taskId", &f.TaskID, required)
	enum(s, "disposition", &f.Disposition, required, DispositionStop, DispositionKeepIdle)
	enum(s, "deliver", &f.Deliver, required, DeliverBranch, DeliverPR, DeliverPatch, DeliverNone, DeliverMerge)
	s.String("target", &f.Target, optional)
	s.String("message", &f.Message, optional)
}

// TaskRejectFrame (S→A) sends a task back with feedback.
type TaskRejectFrame struct {
	Header
	TaskID   string
	Feedback string
	// RejectionID names this rejection of the task (pifleet addition,
	// optional): a server that restarted after recording a rejection may
	// send it again, and an agent carries out a rejection it has already
	// carried out only once.
	RejectionID string
}

// FrameType returns "task_reject".
func (*TaskRejectFrame) FrameType() string { return TypeTaskReject }

// schema lists task_reject's fields.
func (f *TaskRejectFrame) schema(s *schema) {
	s.String("taskId", &f.TaskID, required)
	s.String("feedback", &f.Feedback, required)
	s.String("rejectionId", &f.RejectionID, optional)
}

// DeliverFrame (S→A) asks for a task's result to be delivered.
type DeliverFrame struct {
	Header
	TaskID     string
	InstanceID string
	Mode       DeliveryMode
	// Target (pifleet addition) is the branch a merge goes into (default:
	// the branch the worktree started from); Message the commit message
	// (default: derived from the task).
	Target, Message string
}

// FrameType returns "deliver".
func (*DeliverFrame) FrameType() string { return TypeDeliver }

// schema lists deliver's fields.
func (f *DeliverFrame) schema(s *schema) {
	s.String("taskId", &f.TaskID, required)
	s.String("instanceId", &f.InstanceID, required)
	enum(s, "mode", &f.Mode, required, DeliverBranch, DeliverPR, DeliverPatch, DeliverMerge)
	s.String("target", &f.Target, optional)
	s.String("message", &f.Message, optional)
}

// DeliveredFrame (A→S) answers deliver.
type DeliveredFrame struct {
	Header
	TaskID string
	Mode   DeliveryMode
	Branch string
	PRURL  string
	Patch  string
	// Commit and Target (pifleet additions): the branch's head after the
	// delivery commit, and for a merge the merge commit and the branch it
	// went into.
	Commit, Target string
}

// FrameType returns "delivered".
func (*DeliveredFrame) FrameType() string { return TypeDelivered }

// schema lists delivered's fields.
func (f *DeliveredFrame) schema(s *schema) {
	s.String("taskId", &f.TaskID, required)
	enum(s, "mode", &f.Mode, required, DeliverBranch, DeliverPR, DeliverPatch, DeliverMerge)
	s.String("branch", &f.Branch, optional)
	s.String("prUrl", &f.PRURL, optional)
	s.String("patch", &f.Patch, optional)
	s.String("commit", &f.Commit, optional)
	s.String("target", &f.Target, optional)
}

// UIKind is the kind of a worker's UI request.
type UIKind string

// UI request kinds.
const (
	UIConfirm UIKind = "confirm"
	UISelect  UIKind = "select"
	UIInput   UIKind = "input"
)

// UIRequestFrame (A→S) forwards a worker's UI question.
type UIRequestFrame struct {
	Header
	InstanceID string
	RequestID  string
	Kind       UIKind
	Title      string
	Message    string
	Options    []string
}

// FrameType returns "ui_request".
func (*UIRequestFrame) FrameType() string { return TypeUIRequest }

// schema lists ui_request's fields.
func (f *UIRequestFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.String("requestId", &f.RequestID, required)
	enum(s, "kind", &f.Kind, required, UIConfirm, UISelect, UIInput)
	s.String("title", &f.Title, required)
	s.String("message", &f.Message, optional)
	s.Strings("options", &f.Options, optional)
}

// UIResponseFrame (S→A) answers a ui_request.
type UIResponseFrame struct {
	Header
	InstanceID string
	RequestID  string
	// Value is a JSON string, boolean or null; written as null when nil.
	Value    json.RawMessage
	TimedOut bool
}

// FrameType returns "ui_response".
func (*UIResponseFrame) FrameType() string { return TypeUIResponse }

// schema lists ui_response's fields.
func (f *UIResponseFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.String("requestId", &f.RequestID, required)
	s.RawOf("value", &f.Value, required, kindString|kindBool|kindNull)
	s.Bool("timedOut", &f.TimedOut, optional)
}

// SessionsReportFrame (A→S) lists the agent's pi sessions.
type SessionsReportFrame struct {
	Header
	Machine  string
	Full     bool
	Sessions []SessionInfo
	// Page and Pages (pifleet additions) number the frames of a full
	// report too big for one: pages 0 … Pages-1, each with full:true, sent
	// in order on one connection. Absent (nil) on a report in one frame.
	Page, Pages *float64
}

// FrameType returns "sessions_report".
func (*SessionsReportFrame) FrameType() string { return TypeSessionsReport }

// schema lists sessions_report's fields.
func (f *SessionsReportFrame) schema(s *schema) {
	s.String("machine", &f.Machine, required)
	s.Bool("full", &f.Full, required)
	structsField(s, "sessions", &f.Sessions, required)
	s.OptNumber("page", &f.Page)
	s.OptNumber("pages", &f.Pages)
}

// SessionSearchFrame (S→A) searches the agent's sessions.
type SessionSearchFrame struct {
	Header
	Query string
	Cwd   string
}

// FrameType returns "session_search".
func (*SessionSearchFrame) FrameType() string { return TypeSessionSearch }

// schema lists session_search's fields.
func (f *SessionSearchFrame) schema(s *schema) {
	s.String("query", &f.Query, required)
	s.String("cwd", &f.Cwd, optional)
}

// SessionHitsFrame (A→S) answers session_search.
type SessionHitsFrame struct {
	Header
	Hits []SessionHit
}

// FrameType returns "session_hits".
func (*SessionHitsFrame) FrameType() string { return TypeSessionHits }

// schema lists session_hits's fields.
func (f *SessionHitsFrame) schema(s *schema) {
	structsField(s, "hits", &f.Hits, required)
}

// CapabilityWorktree, in an agent's hello, says it runs isolated workers
// (spawn.isolation), reports their diffs and delivers their work
// (deliver, task_accept.deliver other than "none").
const CapabilityWorktree = "worktree"

// CapabilityExec, in an agent's hello, says its exec plane is on: it
// answers exec_start.
const CapabilityExec = "exec-v1"

// ExecStartFrame (S→A) runs a command on the agent's machine.
type ExecStartFrame struct {
	Header
	Mode           ExecMode
	Cwd            string
	Command        string // shell mode
	Executable     string // argv mode
	Args           []string
	TimeoutSeconds *float64
	// InstanceID (a pifleet addition) runs the command in that worker's
	// working tree: a relative Cwd is resolved there and the command may
	// not leave it.
	InstanceID string
}

// FrameType returns "exec_start".
func (*ExecStartFrame) FrameType() string { return TypeExecStart }

// schema lists exec_start's fields.
func (f *ExecStartFrame) schema(s *schema) {
	enum(s, "mode", &f.Mode, required, ExecShell, ExecArgv)
	s.String("cwd", &f.Cwd, required)
	s.String("command", &f.Command, optional)
	s.String("executable", &f.Executable, optional)
	s.Strings("args", &f.Args, optional)
	s.OptNumber("timeoutSeconds", &f.TimeoutSeconds)
	s.String("instanceId", &f.InstanceID, optional)
}

// ExecStartedFrame (A→S) answers exec_start.
type ExecStartedFrame struct {
	Header
	ExecID    string
	StartedAt float64 // ms since the epoch
}

// FrameType returns "exec_started".
func (*ExecStartedFrame) FrameType() string { return TypeExecStarted }

// schema lists exec_started's fields.
func (f *ExecStartedFrame) schema(s *schema) {
	s.String("execId", &f.ExecID, required)
	s.Number("startedAt", &f.StartedAt)
}

// Stream names an output stream of an execution.
type Stream string

// Output streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// ExecOutputFrame (A→S, owner only) carries a chunk of output.
type ExecOutputFrame struct {
	Header
	ExecID string
	// Seq counts chunks of both streams together.
	Seq    float64
	Stream Stream
	Base64 string
}

// FrameType returns "exec_output".
func (*ExecOutputFrame) FrameType() string { return TypeExecOutput }

// schema lists exec_output's fields.
func (f *ExecOutputFrame) schema(s *schema) {
	s.String("execId", &f.ExecID, required)
	s.Number("seq", &f.Seq)
	enum(s, "stream", &f.Stream, required, Stdout, Stderr)
	s.String("base64", &f.Base64, required)
}

// ExecExitFrame (A→S, owner only) reports the end of an execution.
type ExecExitFrame struct {
	Header
	ExecID string
	// ExitCode and Signal are always on the wire, null when nil.
	ExitCode   *float64
	Signal     *string
	TimedOut   bool
	Aborted    bool
	DurationMs float64
}

// FrameType returns "exec_exit".
func (*ExecExitFrame) FrameType() string { return TypeExecExit }

// schema lists exec_exit's fields.
func (f *ExecExitFrame) schema(s *schema) {
	s.String("execId", &f.ExecID, required)
	s.NullableNumber("exitCode", &f.ExitCode, required)
	s.NullableString("signal", &f.Signal, required)
	s.Bool("timedOut", &f.TimedOut, required)
	s.Bool("aborted", &f.Aborted, required)
	s.Number("durationMs", &f.DurationMs)
}

// ExecAbortFrame (S→A) aborts an execution.
type ExecAbortFrame struct {
	Header
	ExecID string
}

// FrameType returns "exec_abort".
func (*ExecAbortFrame) FrameType() string { return TypeExecAbort }

// schema lists exec_abort's fields.
func (f *ExecAbortFrame) schema(s *schema) {
	s.String("execId", &f.ExecID, required)
}

// ExecAbortedFrame (A→S) answers exec_abort.
type ExecAbortedFrame struct {
	Header
	ExecID string
}

// FrameType returns "exec_aborted".
func (*ExecAbortedFrame) FrameType() string { return TypeExecAborted }

// schema lists exec_aborted's fields.
func (f *ExecAbortedFrame) schema(s *schema) {
	s.String("execId", &f.ExecID, required)
}

// ExecListFrame (S→A) asks for active and recent executions.
type ExecListFrame struct{ Header }

// FrameType returns "exec_list".
func (*ExecListFrame) FrameType() string { return TypeExecList }

// schema: exec_list has no fields.
func (*ExecListFrame) schema(*schema) {}

// ExecInstancesFrame (A→S) answers exec_list.
type ExecInstancesFrame struct {
	Header
	Executions []ExecRecord
}

// FrameType returns "exec_instances".
func (*ExecInstancesFrame) FrameType() string { return TypeExecInstances }

// schema lists exec_instances's fields.
func (f *ExecInstancesFrame) schema(s *schema) {
	structsField(s, "executions", &f.Executions, required)
}

// FsReadFrame (S→A) reads a file in a worker's cwd.
type FsReadFrame struct {
	Header
	InstanceID string
	Path       string
	// Offset and Limit page a text file by lines; nil means the default
	// (0 and 2,000), which differs from an explicit 0 limit.
	Offset *float64
	Limit  *float64
}

// FrameType returns "fs_read".
func (*FsReadFrame) FrameType() string { return TypeFsRead }

// schema lists fs_read's fields.
func (f *FsReadFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.String("path", &f.Path, required)
	s.OptNumber("offset", &f.Offset)
	s.OptNumber("limit", &f.Limit)
}

// FsListFrame (S→A) lists a directory in a worker's cwd.
type FsListFrame struct {
	Header
	InstanceID string
	Path       string
}

// FrameType returns "fs_list".
func (*FsListFrame) FrameType() string { return TypeFsList }

// schema lists fs_list's fields.
func (f *FsListFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.String("path", &f.Path, required)
}

// FsGrepFrame (S→A) searches a worker's cwd.
type FsGrepFrame struct {
	Header
	InstanceID string
	Pattern    string
	Glob       string
}

// FrameType returns "fs_grep".
func (*FsGrepFrame) FrameType() string { return TypeFsGrep }

// schema lists fs_grep's fields.
func (f *FsGrepFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.String("pattern", &f.Pattern, required)
	s.String("glob", &f.Glob, optional)
}

// FsDiffFrame (S→A) runs git diff (or rev-parse) in a worker's cwd.
type FsDiffFrame struct {
	Header
	InstanceID string
	Ref        string
	Staged     bool
	Stat       bool
	RevParse   bool
	// Base (pifleet addition) diffs an isolated worker's worktree against
	// the commit it started from, new files included (Ref is then
	// ignored).
	Base bool
}

// FrameType returns "fs_diff".
func (*FsDiffFrame) FrameType() string { return TypeFsDiff }

// schema lists fs_diff's fields.
func (f *FsDiffFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.String("ref", &f.Ref, optional)
	s.Bool("staged", &f.Staged, optional)
	s.Bool("stat", &f.Stat, optional)
	s.Bool("revParse", &f.RevParse, optional)
	s.Bool("base", &f.Base, optional)
}

// FsResultFrame (A→S) answers every fs_* request.
type FsResultFrame struct {
	Header
	Done bool
	// Text is the text page; "" (an empty file) and nil (no text) differ.
	Text      *string
	Base64    string
	Mime      string
	Entries   []FsEntry
	Truncated bool
	Error     *FsError
}

// FrameType returns "fs_result".
func (*FsResultFrame) FrameType() string { return TypeFsResult }

// schema lists fs_result's fields.
func (f *FsResultFrame) schema(s *schema) {
	s.Bool("done", &f.Done, required)
	s.StringPtr("text", &f.Text)
	s.String("base64", &f.Base64, optional)
	s.String("mime", &f.Mime, optional)
	structsField(s, "entries", &f.Entries, optional)
	s.Bool("truncated", &f.Truncated, optional)
	optStructField(s, "error", &f.Error)
}
