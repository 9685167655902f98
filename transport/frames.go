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

// Frame is one protocol frame. Every frame type is a struct embedding
// Header, with a FrameType method naming it on the wire and a Schema method
// listing its fields; the pointer to the struct implements Frame.
type Frame interface {
	Object
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
}

// FrameType returns "hello".
func (*HelloFrame) FrameType() string { return TypeHello }

// Schema lists hello's fields.
func (f *HelloFrame) Schema(s *Schema) {
	s.String("machine", &f.Machine, Required)
	Enum(s, "role", &f.Role, Required, RoleServer, RoleAgent)
	s.String("packageVersion", &f.PackageVersion, Required)
	s.String("platform", &f.Platform, Required)
	Structs(s, "availableModels", &f.AvailableModels, Optional)
	s.Strings("capabilities", &f.Capabilities, Optional)
	s.String("challenge", &f.Challenge, Optional)
	Structs(s, "proofs", &f.Proofs, Optional)
	s.Bool("proxied", &f.Proxied, Optional)
}

// HeartbeatFrame (both ways, every 15 s) keeps the connection alive. Conn
// sends and swallows them itself.
type HeartbeatFrame struct{ Header }

// FrameType returns "heartbeat".
func (*HeartbeatFrame) FrameType() string { return TypeHeartbeat }

// Schema: heartbeat has no fields.
func (*HeartbeatFrame) Schema(*Schema) {}

// ErrorFrame (both ways) reports a protocol or dispatch error. It is never
// answered with another error frame.
type ErrorFrame struct {
	Header
	Code    string
	Message string
}

// FrameType returns "error".
func (*ErrorFrame) FrameType() string { return TypeError }

// Schema lists error's fields.
func (f *ErrorFrame) Schema(s *Schema) {
	s.String("code", &f.Code, Required)
	s.String("message", &f.Message, Required)
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

// Schema lists spawn's fields.
func (f *SpawnFrame) Schema(s *Schema) {
	s.String("cwd", &f.Cwd, Required)
	s.String("bundle", &f.Bundle, Required)
	s.String("bundleHash", &f.BundleHash, Optional)
	s.String("fromSession", &f.FromSession, Optional)
	Enum(s, "sessionMode", &f.SessionMode, Optional, SessionClone, SessionAttach)
	OptStruct(s, "model", &f.Model)
	s.StringMap("env", &f.Env, Optional)
	OptStruct(s, "budget", &f.Budget)
	OptStruct(s, "isolation", &f.Isolation)
}

// SpawnedFrame (A→S) answers spawn with the new instance.
type SpawnedFrame struct {
	Header
	Instance InstanceInfo
}

// FrameType returns "spawned".
func (*SpawnedFrame) FrameType() string { return TypeSpawned }

// Schema lists spawned's fields.
func (f *SpawnedFrame) Schema(s *Schema) {
	Struct(s, "instance", &f.Instance)
}

// SpawnErrorFrame (A→S) answers spawn when no worker was started.
type SpawnErrorFrame struct {
	Header
	Code    string
	Message string
}

// FrameType returns "spawn_error".
func (*SpawnErrorFrame) FrameType() string { return TypeSpawnError }

// Schema lists spawn_error's fields.
func (f *SpawnErrorFrame) Schema(s *Schema) {
	s.String("code", &f.Code, Required)
	s.String("message", &f.Message, Required)
}

// StopFrame (S→A) stops a worker.
type StopFrame struct {
	Header
	InstanceID string
}

// FrameType returns "stop".
func (*StopFrame) FrameType() string { return TypeStop }

// Schema lists stop's fields.
func (f *StopFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
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

// Schema lists stopped's fields.
func (f *StoppedFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.Bool("forced", &f.Forced, Required)
	s.String("sessionPath", &f.SessionPath, Optional)
}

// ListFrame (S→A) asks for the agent's instances.
type ListFrame struct{ Header }

// FrameType returns "list".
func (*ListFrame) FrameType() string { return TypeList }

// Schema: list has no fields.
func (*ListFrame) Schema(*Schema) {}

// InstancesFrame (A→S) answers list.
type InstancesFrame struct {
	Header
	Instances []InstanceInfo
}

// FrameType returns "instances".
func (*InstancesFrame) FrameType() string { return TypeInstances }

// Schema lists instances's fields.
func (f *InstancesFrame) Schema(s *Schema) {
	Structs(s, "instances", &f.Instances, Required)
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

// Schema lists rpc's fields.
func (f *RPCFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.Raw("command", &f.Command, Required)
	s.String("taskId", &f.TaskID, Optional)
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

// Schema lists event's fields.
func (f *EventFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.Raw("event", &f.Event, Required)
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

// Schema lists task_done's fields.
func (f *TaskDoneFrame) Schema(s *Schema) {
	s.String("taskId", &f.TaskID, Required)
	s.String("instanceId", &f.InstanceID, Required)
	s.Number("seq", &f.Seq)
	Enum(s, "status", &f.Status, Required, TaskSettled, TaskBudgetExceeded, TaskAborted)
	s.String("summary", &f.Summary, Required)
	s.String("lastAssistantMessage", &f.LastAssistantMessage, Optional)
	OptStruct(s, "stats", &f.Stats)
	OptStruct(s, "worktree", &f.Worktree)
}

// TaskDoneAckFrame (S→A) acknowledges a task_done.
type TaskDoneAckFrame struct {
	Header
	TaskID string
	Seq    float64
}

// FrameType returns "task_done_ack".
func (*TaskDoneAckFrame) FrameType() string { return TypeTaskDoneAck }

// Schema lists task_done_ack's fields.
func (f *TaskDoneAckFrame) Schema(s *Schema) {
	s.String("taskId", &f.TaskID, Required)
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

// Schema lists task_accept's fields.
func (f *TaskAcceptFrame) Schema(s *Schema) {
	s.String("taskId", &f.TaskID, Required)
	Enum(s, "disposition", &f.Disposition, Required, DispositionStop, DispositionKeepIdle)
	Enum(s, "deliver", &f.Deliver, Required, DeliverBranch, DeliverPR, DeliverPatch, DeliverNone, DeliverMerge)
	s.String("target", &f.Target, Optional)
	s.String("message", &f.Message, Optional)
}

// TaskRejectFrame (S→A) sends a task back with feedback.
type TaskRejectFrame struct {
	Header
	TaskID   string
	Feedback string
}

// FrameType returns "task_reject".
func (*TaskRejectFrame) FrameType() string { return TypeTaskReject }

// Schema lists task_reject's fields.
func (f *TaskRejectFrame) Schema(s *Schema) {
	s.String("taskId", &f.TaskID, Required)
	s.String("feedback", &f.Feedback, Required)
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

// Schema lists deliver's fields.
func (f *DeliverFrame) Schema(s *Schema) {
	s.String("taskId", &f.TaskID, Required)
	s.String("instanceId", &f.InstanceID, Required)
	Enum(s, "mode", &f.Mode, Required, DeliverBranch, DeliverPR, DeliverPatch, DeliverMerge)
	s.String("target", &f.Target, Optional)
	s.String("message", &f.Message, Optional)
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

// Schema lists delivered's fields.
func (f *DeliveredFrame) Schema(s *Schema) {
	s.String("taskId", &f.TaskID, Required)
	Enum(s, "mode", &f.Mode, Required, DeliverBranch, DeliverPR, DeliverPatch, DeliverMerge)
	s.String("branch", &f.Branch, Optional)
	s.String("prUrl", &f.PRURL, Optional)
	s.String("patch", &f.Patch, Optional)
	s.String("commit", &f.Commit, Optional)
	s.String("target", &f.Target, Optional)
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

// Schema lists ui_request's fields.
func (f *UIRequestFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.String("requestId", &f.RequestID, Required)
	Enum(s, "kind", &f.Kind, Required, UIConfirm, UISelect, UIInput)
	s.String("title", &f.Title, Required)
	s.String("message", &f.Message, Optional)
	s.Strings("options", &f.Options, Optional)
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

// Schema lists ui_response's fields.
func (f *UIResponseFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.String("requestId", &f.RequestID, Required)
	s.RawOf("value", &f.Value, Required, KindString|KindBool|KindNull)
	s.Bool("timedOut", &f.TimedOut, Optional)
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

// Schema lists sessions_report's fields.
func (f *SessionsReportFrame) Schema(s *Schema) {
	s.String("machine", &f.Machine, Required)
	s.Bool("full", &f.Full, Required)
	Structs(s, "sessions", &f.Sessions, Required)
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

// Schema lists session_search's fields.
func (f *SessionSearchFrame) Schema(s *Schema) {
	s.String("query", &f.Query, Required)
	s.String("cwd", &f.Cwd, Optional)
}

// SessionHitsFrame (A→S) answers session_search.
type SessionHitsFrame struct {
	Header
	Hits []SessionHit
}

// FrameType returns "session_hits".
func (*SessionHitsFrame) FrameType() string { return TypeSessionHits }

// Schema lists session_hits's fields.
func (f *SessionHitsFrame) Schema(s *Schema) {
	Structs(s, "hits", &f.Hits, Required)
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

// Schema lists exec_start's fields.
func (f *ExecStartFrame) Schema(s *Schema) {
	Enum(s, "mode", &f.Mode, Required, ExecShell, ExecArgv)
	s.String("cwd", &f.Cwd, Required)
	s.String("command", &f.Command, Optional)
	s.String("executable", &f.Executable, Optional)
	s.Strings("args", &f.Args, Optional)
	s.OptNumber("timeoutSeconds", &f.TimeoutSeconds)
	s.String("instanceId", &f.InstanceID, Optional)
}

// ExecStartedFrame (A→S) answers exec_start.
type ExecStartedFrame struct {
	Header
	ExecID    string
	StartedAt float64 // ms since the epoch
}

// FrameType returns "exec_started".
func (*ExecStartedFrame) FrameType() string { return TypeExecStarted }

// Schema lists exec_started's fields.
func (f *ExecStartedFrame) Schema(s *Schema) {
	s.String("execId", &f.ExecID, Required)
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

// Schema lists exec_output's fields.
func (f *ExecOutputFrame) Schema(s *Schema) {
	s.String("execId", &f.ExecID, Required)
	s.Number("seq", &f.Seq)
	Enum(s, "stream", &f.Stream, Required, Stdout, Stderr)
	s.String("base64", &f.Base64, Required)
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

// Schema lists exec_exit's fields.
func (f *ExecExitFrame) Schema(s *Schema) {
	s.String("execId", &f.ExecID, Required)
	s.NullableNumber("exitCode", &f.ExitCode, Required)
	s.NullableString("signal", &f.Signal, Required)
	s.Bool("timedOut", &f.TimedOut, Required)
	s.Bool("aborted", &f.Aborted, Required)
	s.Number("durationMs", &f.DurationMs)
}

// ExecAbortFrame (S→A) aborts an execution.
type ExecAbortFrame struct {
	Header
	ExecID string
}

// FrameType returns "exec_abort".
func (*ExecAbortFrame) FrameType() string { return TypeExecAbort }

// Schema lists exec_abort's fields.
func (f *ExecAbortFrame) Schema(s *Schema) {
	s.String("execId", &f.ExecID, Required)
}

// ExecAbortedFrame (A→S) answers exec_abort.
type ExecAbortedFrame struct {
	Header
	ExecID string
}

// FrameType returns "exec_aborted".
func (*ExecAbortedFrame) FrameType() string { return TypeExecAborted }

// Schema lists exec_aborted's fields.
func (f *ExecAbortedFrame) Schema(s *Schema) {
	s.String("execId", &f.ExecID, Required)
}

// ExecListFrame (S→A) asks for active and recent executions.
type ExecListFrame struct{ Header }

// FrameType returns "exec_list".
func (*ExecListFrame) FrameType() string { return TypeExecList }

// Schema: exec_list has no fields.
func (*ExecListFrame) Schema(*Schema) {}

// ExecInstancesFrame (A→S) answers exec_list.
type ExecInstancesFrame struct {
	Header
	Executions []ExecRecord
}

// FrameType returns "exec_instances".
func (*ExecInstancesFrame) FrameType() string { return TypeExecInstances }

// Schema lists exec_instances's fields.
func (f *ExecInstancesFrame) Schema(s *Schema) {
	Structs(s, "executions", &f.Executions, Required)
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

// Schema lists fs_read's fields.
func (f *FsReadFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.String("path", &f.Path, Required)
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

// Schema lists fs_list's fields.
func (f *FsListFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.String("path", &f.Path, Required)
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

// Schema lists fs_grep's fields.
func (f *FsGrepFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.String("pattern", &f.Pattern, Required)
	s.String("glob", &f.Glob, Optional)
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

// Schema lists fs_diff's fields.
func (f *FsDiffFrame) Schema(s *Schema) {
	s.String("instanceId", &f.InstanceID, Required)
	s.String("ref", &f.Ref, Optional)
	s.Bool("staged", &f.Staged, Optional)
	s.Bool("stat", &f.Stat, Optional)
	s.Bool("revParse", &f.RevParse, Optional)
	s.Bool("base", &f.Base, Optional)
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

// Schema lists fs_result's fields.
func (f *FsResultFrame) Schema(s *Schema) {
	s.Bool("done", &f.Done, Required)
	s.StringPtr("text", &f.Text)
	s.String("base64", &f.Base64, Optional)
	s.String("mime", &f.Mime, Optional)
	Structs(s, "entries", &f.Entries, Optional)
	s.Bool("truncated", &f.Truncated, Optional)
	OptStruct(s, "error", &f.Error)
}
