package transport

// Shared shapes (reference 1.4 and the nested records of 1.5). Each is a
// shape: its schema method is the one place that says which fields exist,
// which are required and what type they have.

// ModelRef names a model: {provider, id, thinking?}.
type ModelRef struct {
	Provider string
	ID       string
	// Thinking is the thinking level ("low", "high", …); optional.
	Thinking string
}

// schema lists ModelRef's fields.
func (m *ModelRef) schema(s *schema) {
	s.String("provider", &m.Provider, required)
	s.String("id", &m.ID, required)
	s.String("thinking", &m.Thinking, optional)
}

// KeyProof is one signature of a handshake (pifleet addition): Key is the
// signer's public key ("ed25519:…"), Sig the base64 Ed25519 signature
// over the connection's transcript (transport/auth).
type KeyProof struct {
	Key string
	Sig string
}

// schema lists KeyProof's fields.
func (k *KeyProof) schema(s *schema) {
	s.String("key", &k.Key, required)
	s.String("sig", &k.Sig, required)
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
	// SpawnID (pifleet addition) is the id of the spawn request that
	// started the worker (see CapabilitySpawnID).
	SpawnID string
}

// schema lists InstanceInfo's fields.
func (i *InstanceInfo) schema(s *schema) {
	s.String("instanceId", &i.InstanceID, required)
	s.OptNumber("pid", &i.PID)
	s.String("cwd", &i.Cwd, required)
	s.String("bundle", &i.Bundle, optional)
	s.String("bundleHash", &i.BundleHash, optional)
	s.String("sessionPath", &i.SessionPath, optional)
	s.String("state", (*string)(&i.State), required)
	optStructField(s, "model", &i.Model)
	s.Bool("modelPinned", &i.ModelPinned, optional)
	optStructField(s, "worktree", &i.Worktree)
	s.String("spawnId", &i.SpawnID, optional)
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

// schema lists Isolation's fields.
func (i *Isolation) schema(s *schema) {
	enum(s, "mode", &i.Mode, required, IsolationWorktree)
	s.String("branch", &i.Branch, optional)
	s.String("base", &i.Base, optional)
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

// schema lists WorktreeInfo's fields.
func (w *WorktreeInfo) schema(s *schema) {
	s.String("repo", &w.Repo, required)
	s.String("path", &w.Path, required)
	s.String("branch", &w.Branch, required)
	s.String("base", &w.Base, required)
	s.String("baseRef", &w.BaseRef, optional)
}

// WorktreeStat is an isolated worker's changes against its base.
type WorktreeStat struct {
	Branch, Base                 string
	Files, Insertions, Deletions float64
}

// schema lists WorktreeStat's fields.
func (w *WorktreeStat) schema(s *schema) {
	s.String("branch", &w.Branch, required)
	s.String("base", &w.Base, required)
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

// schema lists SessionInfo's fields.
func (i *SessionInfo) schema(s *schema) {
	s.String("sessionId", &i.SessionID, required)
	s.String("path", &i.Path, required)
	s.String("name", &i.Name, optional)
	s.String("cwd", &i.Cwd, required)
	enum(s, "kind", &i.Kind, required, SessionBaseline, SessionTask, SessionScratch)
	s.Bool("pinned", &i.Pinned, required)
	s.String("parentSession", &i.ParentSession, optional)
	s.String("bundle", &i.Bundle, optional)
	s.String("bundleHash", &i.BundleHash, optional)
	s.String("gitHead", &i.GitHead, optional)
	s.Strings("taskIds", &i.TaskIDs, optional)
	s.Strings("labels", &i.Labels, optional)
	s.Number("updatedAt", &i.UpdatedAt)
	s.String("attachedInstanceId", &i.AttachedInstanceID, optional)
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

// schema lists Budget's fields.
func (b *Budget) schema(s *schema) {
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

// schema lists TaskStats's fields.
func (t *TaskStats) schema(s *schema) {
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

// schema lists SessionHit's fields.
func (h *SessionHit) schema(s *schema) {
	s.String("sessionId", &h.SessionID, required)
	s.String("path", &h.Path, required)
	s.String("snippet", &h.Snippet, required)
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

// schema lists ExecRecord's fields.
func (r *ExecRecord) schema(s *schema) {
	s.String("execId", &r.ExecID, required)
	enum(s, "mode", &r.Mode, required, ExecShell, ExecArgv)
	s.String("cwd", &r.Cwd, required)
	enum(s, "state", &r.State, required, ExecRunning, ExecExited)
	s.Number("startedAt", &r.StartedAt)
	s.OptNumber("finishedAt", &r.FinishedAt)
	s.NullableNumber("exitCode", &r.ExitCode, optional)
	s.Bool("timedOut", &r.TimedOut, optional)
	s.Bool("aborted", &r.Aborted, optional)
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

// schema lists FsEntry's fields.
func (e *FsEntry) schema(s *schema) {
	s.String("name", &e.Name, required)
	enum(s, "kind", &e.Kind, required, FsFile, FsDir)
	s.OptNumber("bytes", &e.Bytes)
}

// FsError is the error of a failed file-service request.
type FsError struct {
	Code    string
	Message string
}

// schema lists FsError's fields.
func (e *FsError) schema(s *schema) {
	s.String("code", &e.Code, required)
	s.String("message", &e.Message, required)
}
