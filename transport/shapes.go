package transport

// Shared shapes (reference 1.4 and the nested records of 1.5). Each is an
// Object: its Schema method is the one place that says which fields exist,
// which are required and what type they have.

// ModelRef names a model: {provider, id, thinking?}.
type ModelRef struct {
	Provider string
	ID       string
	// Thinking is the thinking level ("low", "high", …); optional.
	Thinking string
}

// Schema lists ModelRef's fields.
func (m *ModelRef) Schema(s *Schema) {
	s.String("provider", &m.Provider, Required)
	s.String("id", &m.ID, Required)
	s.String("thinking", &m.Thinking, Optional)
}

// KeyProof is one signature of a handshake (pifleet addition): Key is the
// signer's public key ("ed25519:…"), Sig the base64 Ed25519 signature
// over the connection's transcript (transport/auth).
type KeyProof struct {
	Key string
	Sig string
}

// Schema lists KeyProof's fields.
func (k *KeyProof) Schema(s *Schema) {
	s.String("key", &k.Key, Required)
	s.String("sig", &k.Sig, Required)
}

// InstanceState is the state of a worker instance as the agent reports it.
// The schema accepts any string; these are the ones agents send.
type InstanceState string

// Instance states sent by agents.
const (
	InstanceRunning InstanceState = "running"
	InstanceStopped InstanceState = "stopped" // stopped via a stop frame
	InstanceExited  InstanceState = "exited"  // the process ended on its own
	InstanceLost    InstanceState = "lost"    // from a previous agent life
)

// InstanceInfo describes one worker instance.
type InstanceInfo struct {
	InstanceID string
	// PID is set only while the process is alive.
	PID         *float64
	Cwd         string
	Bundle      string
	BundleHash  string
	SessionPath string
	State       InstanceState
	Model       *ModelRef
	// ModelPinned (pifleet) is set while set_model and cycle_model are
	// refused and a changed model is set back.
	ModelPinned bool
	// Worktree (pifleet addition) is the isolated worker's git worktree.
	Worktree *WorktreeInfo
}

// Schema lists InstanceInfo's fields.
func (i *InstanceInfo) Schema(s *Schema) {
	s.String("instanceId", &i.InstanceID, Required)
	s.OptNumber("pid", &i.PID)
	s.String("cwd", &i.Cwd, Required)
	s.String("bundle", &i.Bundle, Optional)
	s.String("bundleHash", &i.BundleHash, Optional)
	s.String("sessionPath", &i.SessionPath, Optional)
	s.String("state", (*string)(&i.State), Required)
	OptStruct(s, "model", &i.Model)
	s.Bool("modelPinned", &i.ModelPinned, Optional)
	OptStruct(s, "worktree", &i.Worktree)
}

// IsolationMode is how a worker is kept apart from the others.
type IsolationMode string

// IsolationWorktree: a git worktree of the cwd's repository on a new
// branch.
const IsolationWorktree IsolationMode = "worktree"

// Isolation asks for a worker in a git worktree of its own (spawn).
type Isolation struct {
	Mode IsolationMode
	// Branch is the new branch (default pifleet/<taskId>-<slug> once its
	// first task arrives, pifleet/<instanceId> until then); Base the ref
	// it starts from (default HEAD, on a branch, with no uncommitted
	// changes).
	Branch, Base string
}

// Schema lists Isolation's fields.
func (i *Isolation) Schema(s *Schema) {
	Enum(s, "mode", &i.Mode, Required, IsolationWorktree)
	s.String("branch", &i.Branch, Optional)
	s.String("base", &i.Base, Optional)
}

// WorktreeInfo is an isolated worker's git worktree.
type WorktreeInfo struct {
	// Repo is the repository (the user's own tree); Path the worktree.
	Repo, Path string
	Branch     string
	// Base is the commit the branch started from; BaseRef the branch it
	// was taken from, when it was one.
	Base, BaseRef string
}

// Schema lists WorktreeInfo's fields.
func (w *WorktreeInfo) Schema(s *Schema) {
	s.String("repo", &w.Repo, Required)
	s.String("path", &w.Path, Required)
	s.String("branch", &w.Branch, Required)
	s.String("base", &w.Base, Required)
	s.String("baseRef", &w.BaseRef, Optional)
}

// WorktreeStat is an isolated worker's changes against its base.
type WorktreeStat struct {
	Branch, Base                 string
	Files, Insertions, Deletions float64
}

// Schema lists WorktreeStat's fields.
func (w *WorktreeStat) Schema(s *Schema) {
	s.String("branch", &w.Branch, Required)
	s.String("base", &w.Base, Required)
	s.Number("files", &w.Files)
	s.Number("insertions", &w.Insertions)
	s.Number("deletions", &w.Deletions)
}

// SessionKind classifies a pi session file.
type SessionKind string

// Session kinds.
const (
	SessionBaseline SessionKind = "baseline"
	SessionTask     SessionKind = "task"
	SessionScratch  SessionKind = "scratch"
)

// SessionInfo describes one pi session file on an agent's machine.
type SessionInfo struct {
	SessionID          string
	Path               string
	Name               string
	Cwd                string
	Kind               SessionKind
	Pinned             bool
	ParentSession      string
	Bundle             string
	BundleHash         string
	GitHead            string
	TaskIDs            []string
	Labels             []string
	UpdatedAt          float64 // milliseconds since the epoch, may be fractional
	AttachedInstanceID string
}

// Schema lists SessionInfo's fields.
func (i *SessionInfo) Schema(s *Schema) {
	s.String("sessionId", &i.SessionID, Required)
	s.String("path", &i.Path, Required)
	s.String("name", &i.Name, Optional)
	s.String("cwd", &i.Cwd, Required)
	Enum(s, "kind", &i.Kind, Required, SessionBaseline, SessionTask, SessionScratch)
	s.Bool("pinned", &i.Pinned, Required)
	s.String("parentSession", &i.ParentSession, Optional)
	s.String("bundle", &i.Bundle, Optional)
	s.String("bundleHash", &i.BundleHash, Optional)
	s.String("gitHead", &i.GitHead, Optional)
	s.Strings("taskIds", &i.TaskIDs, Optional)
	s.Strings("labels", &i.Labels, Optional)
	s.Number("updatedAt", &i.UpdatedAt)
	s.String("attachedInstanceId", &i.AttachedInstanceID, Optional)
}

// Budget limits a worker: {maxCost?}.
type Budget struct {
	// MaxCost is the most the worker may spend, in the provider's currency.
	MaxCost *float64
	// MaxTurns and MaxMinutes are pifleet additions (docs/protocol.md); the
	// TypeScript agent ignores them.
	MaxTurns   *float64
	MaxMinutes *float64
}

// Schema lists Budget's fields.
func (b *Budget) Schema(s *Schema) {
	s.OptNumber("maxCost", &b.MaxCost)
	s.OptNumber("maxTurns", &b.MaxTurns)
	s.OptNumber("maxMinutes", &b.MaxMinutes)
}

// TaskStats summarises a finished task; every field is optional.
type TaskStats struct {
	Turns        *float64
	ToolCalls    *float64
	FilesChanged *float64
	Cost         *float64
}

// Schema lists TaskStats's fields.
func (t *TaskStats) Schema(s *Schema) {
	s.OptNumber("turns", &t.Turns)
	s.OptNumber("toolCalls", &t.ToolCalls)
	s.OptNumber("filesChanged", &t.FilesChanged)
	s.OptNumber("cost", &t.Cost)
}

// SessionHit is one session_search match.
type SessionHit struct {
	SessionID string
	Path      string
	Snippet   string
}

// Schema lists SessionHit's fields.
func (h *SessionHit) Schema(s *Schema) {
	s.String("sessionId", &h.SessionID, Required)
	s.String("path", &h.Path, Required)
	s.String("snippet", &h.Snippet, Required)
}

// ExecMode says how an exec command is run.
type ExecMode string

// Exec modes.
const (
	ExecShell ExecMode = "shell" // command run by a shell
	ExecArgv  ExecMode = "argv"  // executable + args, no shell
)

// ExecState is the state of one execution in exec_instances.
type ExecState string

// Exec states.
const (
	ExecRunning ExecState = "running"
	ExecExited  ExecState = "exited"
)

// ExecRecord describes one execution in exec_instances.
type ExecRecord struct {
	ExecID     string
	Mode       ExecMode
	Cwd        string
	State      ExecState
	StartedAt  float64 // ms since the epoch
	FinishedAt *float64
	// ExitCode is nil while running or when the process died by a signal;
	// absent and null both decode to nil.
	ExitCode *float64
	TimedOut bool
	Aborted  bool
}

// Schema lists ExecRecord's fields.
func (r *ExecRecord) Schema(s *Schema) {
	s.String("execId", &r.ExecID, Required)
	Enum(s, "mode", &r.Mode, Required, ExecShell, ExecArgv)
	s.String("cwd", &r.Cwd, Required)
	Enum(s, "state", &r.State, Required, ExecRunning, ExecExited)
	s.Number("startedAt", &r.StartedAt)
	s.OptNumber("finishedAt", &r.FinishedAt)
	s.NullableNumber("exitCode", &r.ExitCode, Optional)
	s.Bool("timedOut", &r.TimedOut, Optional)
	s.Bool("aborted", &r.Aborted, Optional)
}

// FsEntryKind is the kind of a directory entry in fs_result.
type FsEntryKind string

// Entry kinds: anything that is not a directory (symlinks included) is a file.
const (
	FsFile FsEntryKind = "file"
	FsDir  FsEntryKind = "dir"
)

// FsEntry is one directory entry of an fs_list answer.
type FsEntry struct {
	Name  string
	Kind  FsEntryKind
	Bytes *float64
}

// Schema lists FsEntry's fields.
func (e *FsEntry) Schema(s *Schema) {
	s.String("name", &e.Name, Required)
	Enum(s, "kind", &e.Kind, Required, FsFile, FsDir)
	s.OptNumber("bytes", &e.Bytes)
}

// FsError is the error of a failed file-service request.
type FsError struct {
	Code    string
	Message string
}

// Schema lists FsError's fields.
func (e *FsError) Schema(s *Schema) {
	s.String("code", &e.Code, Required)
	s.String("message", &e.Message, Required)
}
