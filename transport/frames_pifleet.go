package transport

import (
	"encoding/json"
)

// pifleet's additions to protocol v1. Every frame here is documented, with
// the reason it exists, in docs/protocol.md. A TypeScript pi-fleet peer
// does not know them and would answer one with an unknown_frame_type
// error, so a pifleet agent sends its unsolicited ones (spawn_progress,
// model_drift, sessions_removed, task_escalated) only to a server whose
// hello announced CapabilityPifleet; everything else is an answer to a
// request only a pifleet server sends.

// CapabilityPifleet, in a hello's capabilities, says the sender speaks the
// frames of this file. An agent lists it in its hello; a pifleet server
// sends a hello {role:"server"} with it (a TypeScript agent ignores
// incoming hellos).
const CapabilityPifleet = "pifleet-v1"

// CapabilityCacheVerify, in an agent's hello, says it answers
// cache_verify (an older pifleet agent does not).
const CapabilityCacheVerify = "cache-verify"

// Wire names of pifleet's frame types.
const (
	TypeSpawnProgress        = "spawn_progress"
	TypeEventsSince          = "events_since"
	TypeEventsReplayed       = "events_replayed"
	TypeSessionEntries       = "session_entries"
	TypeSessionEntriesResult = "session_entries_result"
	TypeRebundle             = "rebundle"
	TypeRebundled            = "rebundled"
	TypeSetTools             = "set_tools"
	TypeToolsSet             = "tools_set"
	TypeModelPin             = "model_pin"
	TypeModelPinned          = "model_pinned"
	TypeModelDrift           = "model_drift"
	TypeSessionsRemoved      = "sessions_removed"
	TypeTaskEscalated        = "task_escalated"
	TypeAuthProof            = "auth_proof"
	TypeRepoHead             = "repo_head"
	TypeRepoHeadResult       = "repo_head_result"
	TypeCacheVerify          = "cache_verify"
	TypeCacheVerifyResult    = "cache_verify_result"
	TypeWorkerExited         = "worker_exited"
	TypeSpawnCancel          = "spawn_cancel"
	TypeUIEnded              = "ui_ended"
)

// CapabilityUIEnded, in an agent's hello, says it sends ui_ended when a
// worker dialog ends without an answer (an older pifleet agent does not:
// a server learns it only from the dialog's own timeout, if it has one).
const CapabilityUIEnded = "ui-ended"

// CapabilitySpawnCancel, in an agent's hello, says it answers
// spawn_cancel (an older pifleet agent does not: a stop during its spawn
// waits for spawned, then stops the worker).
const CapabilitySpawnCancel = "spawn-cancel"

// CapabilitySpawnID, in an agent's hello, says that its instances name
// the spawn that started them (InstanceInfo.SpawnID), in every listing,
// also after a restart of the agent: a server that recorded a spawn
// before it sent it can then adopt the worker of a spawn whose answer it
// never stored, and stop one it gave up.
const CapabilitySpawnID = "spawn-id"

// SessionMode says how a spawn uses its fromSession file.
type SessionMode string

// Session modes of a spawn.
const (
	// SessionClone starts the worker on the file and clones it at once:
	// the worker writes a new file whose parentSession is the source, and
	// the source's bytes never change. The default.
	SessionClone SessionMode = "clone"
	// SessionAttach starts the worker on the file itself: new entries are
	// appended to it. Refused for pinned sessions (baselines) and for a
	// file a live worker already writes.
	SessionAttach SessionMode = "attach"
)

// SpawnPhase is a step of a spawn the agent reports before spawned.
type SpawnPhase string

// Spawn phases, in the order they happen; degraded replaces nothing, it is
// reported in addition when the registry was unavailable and the cached
// bundle is used.
const (
	SpawnAccepted     SpawnPhase = "accepted"     // validated, nothing started yet
	SpawnProvisioning SpawnPhase = "provisioning" // bundle sync progress
	SpawnDegraded     SpawnPhase = "degraded"     // registry unavailable, cached copy used
	SpawnStarting     SpawnPhase = "starting"     // worker process being started
)

// SpawnProgressFrame (A→S) reports how a spawn is going, so that the
// server can walk requested → spawning → provisioning → degraded_cache
// before the spawned answer. It never carries the spawn's id (a request's
// id is for its answer alone); SpawnID echoes it instead.
type SpawnProgressFrame struct {
	Header
	SpawnID    string
	Phase      SpawnPhase
	Bundle     string
	BundleHash string
	// Files and bytes of the bundle sync so far (provisioning, degraded).
	FilesTotal, FilesFetched, FilesReused *float64
	BytesFetched, BytesReused             *float64
	Message                               string
}

// FrameType returns "spawn_progress".
func (*SpawnProgressFrame) FrameType() string { return TypeSpawnProgress }

// schema lists spawn_progress's fields.
func (f *SpawnProgressFrame) schema(s *schema) {
	s.String("spawnId", &f.SpawnID, optional)
	enum(s, "phase", &f.Phase, required, SpawnAccepted, SpawnProvisioning, SpawnDegraded, SpawnStarting)
	s.String("bundle", &f.Bundle, required)
	s.String("bundleHash", &f.BundleHash, optional)
	s.OptNumber("filesTotal", &f.FilesTotal)
	s.OptNumber("filesFetched", &f.FilesFetched)
	s.OptNumber("filesReused", &f.FilesReused)
	s.OptNumber("bytesFetched", &f.BytesFetched)
	s.OptNumber("bytesReused", &f.BytesReused)
	s.String("message", &f.Message, optional)
}

// EventsSinceFrame (S→A) asks for a worker's events after sequence number
// Since (a server that reconnects catches up). The agent answers
// with the buffered events as ordinary event frames carrying their seq,
// to the asking connection only, then one events_replayed.
type EventsSinceFrame struct {
	Header
	InstanceID string
	Since      float64
}

// FrameType returns "events_since".
func (*EventsSinceFrame) FrameType() string { return TypeEventsSince }

// schema lists events_since's fields.
func (f *EventsSinceFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Number("since", &f.Since)
}

// EventsReplayedFrame (A→S) closes an events_since answer.
type EventsReplayedFrame struct {
	Header
	InstanceID string
	Since      float64
	// Count is how many event frames were replayed; LastSeq is the seq of
	// the newest event the worker has produced (0 when none).
	Count   float64
	LastSeq float64
	// Missed counts the events after Since that the bounded ring no
	// longer holds: the server must treat its view as incomplete (and ask
	// for a get_state snapshot).
	Missed float64
}

// FrameType returns "events_replayed".
func (*EventsReplayedFrame) FrameType() string { return TypeEventsReplayed }

// schema lists events_replayed's fields.
func (f *EventsReplayedFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Number("since", &f.Since)
	s.Number("count", &f.Count)
	s.Number("lastSeq", &f.LastSeq)
	s.Number("missed", &f.Missed)
}

// SessionEntriesFrame (S→A) asks for the entries of a session file after an
// entry id (pi 0.73.1 has no get_entries). The file is named by
// a running instance (its session) or by path, which must lie under the
// agent's sessions root.
type SessionEntriesFrame struct {
	Header
	InstanceID string
	Path       string
	// After is the last entry id the server has; "" for every entry.
	After string
	// Limit caps the entries of one answer (default and maximum: what
	// fits one frame).
	Limit *float64
}

// FrameType returns "session_entries".
func (*SessionEntriesFrame) FrameType() string { return TypeSessionEntries }

// schema lists session_entries's fields.
func (f *SessionEntriesFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, optional)
	s.String("path", &f.Path, optional)
	s.String("after", &f.After, optional)
	s.OptNumber("limit", &f.Limit)
}

// SessionEntriesResultFrame (A→S) answers session_entries.
type SessionEntriesResultFrame struct {
	Header
	Path  string
	After string
	// Entries is a JSON array of the entries, each exactly as pi wrote it.
	Entries json.RawMessage
	// LastEntryID is the id to ask after next time; More says more entries
	// follow it already.
	LastEntryID string
	More        bool
	// Error is set instead of entries: unknown_entry (the id is gone: read
	// afresh from ""), unknown_instance, not_found, path_escape.
	Error *FsError
}

// FrameType returns "session_entries_result".
func (*SessionEntriesResultFrame) FrameType() string { return TypeSessionEntriesResult }

// schema lists session_entries_result's fields.
func (f *SessionEntriesResultFrame) schema(s *schema) {
	s.String("path", &f.Path, required)
	s.String("after", &f.After, optional)
	s.RawOf("entries", &f.Entries, required, kindArray)
	s.String("lastEntryId", &f.LastEntryID, optional)
	s.Bool("more", &f.More, required)
	optStructField(s, "error", &f.Error)
}

// RebundleFrame (S→A) switches a running worker to another bundle on the
// same session.
type RebundleFrame struct {
	Header
	InstanceID string
	Bundle     string
	BundleHash string
	// Registry overrides the registry URL the bundle is synced from.
	Registry string
}

// FrameType returns "rebundle".
func (*RebundleFrame) FrameType() string { return TypeRebundle }

// schema lists rebundle's fields.
func (f *RebundleFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.String("bundle", &f.Bundle, required)
	s.String("bundleHash", &f.BundleHash, optional)
	s.String("registry", &f.Registry, optional)
}

// RebundledFrame (A→S) answers rebundle: Switched with the new bundle, or
// not switched with Error, the worker still on Bundle (the old one).
type RebundledFrame struct {
	Header
	InstanceID string
	Switched   bool
	Bundle     string
	BundleHash string
	// Degraded is set when the registry was unavailable and the cached
	// copy of the target was used.
	Degraded bool
	Error    *FsError
}

// FrameType returns "rebundled".
func (*RebundledFrame) FrameType() string { return TypeRebundled }

// schema lists rebundled's fields.
func (f *RebundledFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Bool("switched", &f.Switched, required)
	s.String("bundle", &f.Bundle, required)
	s.String("bundleHash", &f.BundleHash, optional)
	s.Bool("degraded", &f.Degraded, optional)
	optStructField(s, "error", &f.Error)
}

// SetToolsFrame (S→A) narrows (or widens) a worker's active tools:
// the worker restarts on its session with --tools.
type SetToolsFrame struct {
	Header
	InstanceID string
	Tools      []string
}

// FrameType returns "set_tools".
func (*SetToolsFrame) FrameType() string { return TypeSetTools }

// schema lists set_tools's fields.
func (f *SetToolsFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Strings("tools", &f.Tools, required)
}

// ToolsSetFrame (A→S) answers set_tools once the worker runs with Tools.
type ToolsSetFrame struct {
	Header
	InstanceID string
	Tools      []string
}

// FrameType returns "tools_set".
func (*ToolsSetFrame) FrameType() string { return TypeToolsSet }

// schema lists tools_set's fields.
func (f *ToolsSetFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Strings("tools", &f.Tools, required)
}

// ModelPinFrame (S→A) pins (or unpins) a worker's model: while
// pinned, a set_model or cycle_model through rpc is refused, and a model
// change seen in the worker's events is reported as model_drift with
// refused:true.
type ModelPinFrame struct {
	Header
	InstanceID string
	Pin        bool
}

// FrameType returns "model_pin".
func (*ModelPinFrame) FrameType() string { return TypeModelPin }

// schema lists model_pin's fields.
func (f *ModelPinFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Bool("pin", &f.Pin, required)
}

// ModelPinnedFrame (A→S) answers model_pin.
type ModelPinnedFrame struct {
	Header
	InstanceID string
	Pin        bool
	Model      *ModelRef
}

// FrameType returns "model_pinned".
func (*ModelPinnedFrame) FrameType() string { return TypeModelPinned }

// schema lists model_pinned's fields.
func (f *ModelPinnedFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Bool("pin", &f.Pin, required)
	optStructField(s, "model", &f.Model)
}

// ModelDriftFrame (A→S, unsolicited) reports that a worker's model is not
// the one it was started with or pinned to.
type ModelDriftFrame struct {
	Header
	InstanceID string
	Expected   ModelRef
	Actual     ModelRef
	// Refused is set when the change was refused (pinned model) rather
	// than only observed.
	Refused bool
}

// FrameType returns "model_drift".
func (*ModelDriftFrame) FrameType() string { return TypeModelDrift }

// schema lists model_drift's fields.
func (f *ModelDriftFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	structField(s, "expected", &f.Expected)
	structField(s, "actual", &f.Actual)
	s.Bool("refused", &f.Refused, required)
}

// SessionsRemovedFrame (A→S, unsolicited) completes an incremental
// sessions_report (full:false carries added and changed sessions): these
// session files are gone.
type SessionsRemovedFrame struct {
	Header
	Machine string
	Paths   []string
}

// FrameType returns "sessions_removed".
func (*SessionsRemovedFrame) FrameType() string { return TypeSessionsRemoved }

// schema lists sessions_removed's fields.
func (f *SessionsRemovedFrame) schema(s *schema) {
	s.String("machine", &f.Machine, required)
	s.Strings("paths", &f.Paths, required)
}

// TaskEscalatedFrame (A→S, unsolicited) reports that a worker's dialog of
// an open task went unanswered and was given the safe default (cancel or
// deny): a human should look at the task.
type TaskEscalatedFrame struct {
	Header
	TaskID     string
	InstanceID string
	RequestID  string
	Reason     string
}

// FrameType returns "task_escalated".
func (*TaskEscalatedFrame) FrameType() string { return TypeTaskEscalated }

// schema lists task_escalated's fields.
func (f *TaskEscalatedFrame) schema(s *schema) {
	s.String("taskId", &f.TaskID, required)
	s.String("instanceId", &f.InstanceID, required)
	s.String("requestId", &f.RequestID, optional)
	s.String("reason", &f.Reason, required)
}

// WorkerExitedFrame (A→S, unsolicited, pifleet servers only) tells that a
// worker process ended or its shim was lost, at once and to every connected
// server, so that nobody keeps waiting on it; a server that connects later
// gets one for each worker of the agent's life that ended (and for each
// one of a previous life that could not be re-adopted). A v1 server learns
// the same from the instances listing (state exited, lost or stopped).
type WorkerExitedFrame struct {
	Header
	InstanceID string
	// ExitCode is the process's exit code; absent when a signal ended it
	// or when it was lost.
	ExitCode *float64
	// Signal names the signal that ended it ("KILL", "TERM", …).
	Signal string
	// Lost: the shim vanished (or the worker could not be re-adopted); how
	// the process ended is unknown.
	Lost bool
	// Expected: the exit was asked for (stop, task_accept with
	// disposition stop); otherwise the worker died by itself.
	Expected bool
	// State is the instance's state on the agent now: exited, lost or
	// stopped (as instances reports it).
	State InstanceState
	// SessionPath is the worker's session file (intact and resumable).
	SessionPath string
	// TaskID names the task that was open when it ended (its task_done,
	// aborted, follows).
	TaskID string
}

// FrameType returns "worker_exited".
func (*WorkerExitedFrame) FrameType() string { return TypeWorkerExited }

// schema lists worker_exited's fields.
func (f *WorkerExitedFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.OptNumber("exitCode", &f.ExitCode)
	s.String("signal", &f.Signal, optional)
	s.Bool("lost", &f.Lost, optional)
	s.Bool("expected", &f.Expected, required)
	enum(s, "state", &f.State, required, InstanceExited, InstanceLost, InstanceStopped)
	s.String("sessionPath", &f.SessionPath, optional)
	s.String("taskId", &f.TaskID, optional)
}

// UIEndReason says why a worker dialog ended without an answer.
type UIEndReason string

// Reasons of ui_ended.
const (
	// UIEndTimedOut: the dialog's time ran out: the worker's own timeout
	// (pi resolves the dialog by itself), or the agent's dialog wait
	// (the agent sent the safe default: decline a confirm, cancel the
	// others).
	UIEndTimedOut UIEndReason = "timed_out"
	// UIEndCancelled: the worker process that asked is gone (its bundle
	// or tools were switched, which restarts it).
	UIEndCancelled UIEndReason = "cancelled"
)

// UIEndedFrame (A→S, unsolicited, pifleet servers only) tells that a
// dialog of a ui_request ended without an answer, so that nobody is asked
// to answer it any more. A v1 server never receives it; it learns nothing
// of the dialog's end (an answer it sends later is ignored by pi).
type UIEndedFrame struct {
	Header
	InstanceID string
	RequestID  string
	Reason     UIEndReason
}

// FrameType returns "ui_ended".
func (*UIEndedFrame) FrameType() string { return TypeUIEnded }

// schema lists ui_ended's fields.
func (f *UIEndedFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.String("requestId", &f.RequestID, required)
	enum(s, "reason", &f.Reason, required, UIEndTimedOut, UIEndCancelled)
}

// SpawnCancelFrame (S→A) gives up a spawn that has not been answered yet:
// the agent ends whatever it started for it (bundle sync, model probe,
// worker process) and answers the spawn itself with spawn_error
// {code:"spawn_cancelled"}. It has no answer of its own: a spawn already
// answered is not affected (the server stops the worker it got).
type SpawnCancelFrame struct {
	Header
	// SpawnID is the id of the spawn request to give up.
	SpawnID string
}

// FrameType returns "spawn_cancel".
func (*SpawnCancelFrame) FrameType() string { return TypeSpawnCancel }

// schema lists spawn_cancel's fields.
func (f *SpawnCancelFrame) schema(s *schema) {
	s.String("spawnId", &f.SpawnID, required)
}

// AuthProofFrame (A→S) is an agent's proof that it holds its key: sent
// once, right after the agent accepted the server's proof, when the
// server's hello carried a challenge (transport/auth).
type AuthProofFrame struct {
	Header
	KeyProof
}

// FrameType returns "auth_proof".
func (*AuthProofFrame) FrameType() string { return TypeAuthProof }

// schema lists auth_proof's fields.
func (f *AuthProofFrame) schema(s *schema) { f.KeyProof.schema(s) }

// RepoHeadFrame (S→A) asks for the git HEAD commit of a directory on the
// agent's machine: recorded with a baseline, and compared with it later to
// flag a baseline whose repository moved on.
type RepoHeadFrame struct {
	Header
	Cwd string
}

// FrameType returns "repo_head".
func (*RepoHeadFrame) FrameType() string { return TypeRepoHead }

// schema lists repo_head's fields.
func (f *RepoHeadFrame) schema(s *schema) {
	s.String("cwd", &f.Cwd, required)
}

// RepoHeadResultFrame (A→S) answers repo_head with the 40- (or 64-) hex
// commit id, or an error: not_found (no such directory), not_a_repo (git
// knows no HEAD there), git_failed.
type RepoHeadResultFrame struct {
	Header
	Cwd   string
	Head  string
	Error *FsError
}

// FrameType returns "repo_head_result".
func (*RepoHeadResultFrame) FrameType() string { return TypeRepoHeadResult }

// schema lists repo_head_result's fields.
func (f *RepoHeadResultFrame) schema(s *schema) {
	s.String("cwd", &f.Cwd, required)
	s.String("head", &f.Head, optional)
	optStructField(s, "error", &f.Error)
}

// CacheVerifyFrame (S→A) asks the agent to re-hash the bundles of its
// bundle cache against their manifests, so that the server's doctor can
// report a corrupt cache on a worker machine.
type CacheVerifyFrame struct {
	Header
	// Bundle names the one bundle to verify; "" verifies every bundle the
	// cache holds.
	Bundle string
}

// FrameType returns "cache_verify".
func (*CacheVerifyFrame) FrameType() string { return TypeCacheVerify }

// schema lists cache_verify's fields.
func (f *CacheVerifyFrame) schema(s *schema) {
	s.String("bundle", &f.Bundle, optional)
}

// CacheVerifyResultFrame (A→S) answers cache_verify with one entry per
// bundle verified, in name order.
type CacheVerifyResultFrame struct {
	Header
	Bundles []BundleCheck
}

// FrameType returns "cache_verify_result".
func (*CacheVerifyResultFrame) FrameType() string { return TypeCacheVerifyResult }

// schema lists cache_verify_result's fields.
func (f *CacheVerifyResultFrame) schema(s *schema) {
	structsField(s, "bundles", &f.Bundles, required)
}

// BundleCheck is the verdict on one cached bundle: the version its name
// points at is intact (OK), or Error says why not.
type BundleCheck struct {
	Name string
	// BundleHash is the version verified; "" when the pointer could not
	// be read.
	BundleHash string
	OK         bool
	// Error is set when not OK: not_cached (no such bundle in the cache),
	// invalid_bundle (the bundle asked for is not a name), bad_pointer (its pointer file is damaged), corrupt (files differ
	// from the manifest, or the version is gone), cache_failed (the cache
	// could not be read).
	Error *FsError
	// Problems names the corrupt files (the agent sends at most 20;
	// Error's message counts them all).
	Problems []CacheProblem
}

// schema lists a bundle check's fields.
func (b *BundleCheck) schema(s *schema) {
	s.String("name", &b.Name, required)
	s.String("bundleHash", &b.BundleHash, optional)
	s.Bool("ok", &b.OK, required)
	optStructField(s, "error", &b.Error)
	structsField(s, "problems", &b.Problems, optional)
}

// CacheProblem is one file of a cached bundle that is not what its
// manifest says.
type CacheProblem struct {
	// Path is the file's path in the bundle ("/"-separated).
	Path string
	// Reason says what is wrong: missing, not a regular file, not in the
	// manifest, a size or content mismatch, a read error.
	Reason string
}

// schema lists a cache problem's fields.
func (p *CacheProblem) schema(s *schema) {
	s.String("path", &p.Path, required)
	s.String("reason", &p.Reason, required)
}

// pifleetKinds are the frame types above. They are registered by init
// rather than in frameKinds so that this file is the one place that adds
// them; moving them into frameKinds changes nothing else.
var pifleetKinds = []frameKind{
	kind[SpawnProgressFrame](),
	kind[EventsSinceFrame](),
	kind[EventsReplayedFrame](),
	kind[SessionEntriesFrame](),
	kind[SessionEntriesResultFrame](),
	kind[RebundleFrame](),
	kind[RebundledFrame](),
	kind[SetToolsFrame](),
	kind[ToolsSetFrame](),
	kind[ModelPinFrame](),
	kind[ModelPinnedFrame](),
	kind[ModelDriftFrame](),
	kind[SessionsRemovedFrame](),
	kind[TaskEscalatedFrame](),
	kind[AuthProofFrame](),
	kind[RepoHeadFrame](),
	kind[RepoHeadResultFrame](),
	kind[CacheVerifyFrame](),
	kind[CacheVerifyResultFrame](),
	kind[WorkerExitedFrame](),
	kind[SpawnCancelFrame](),
	kind[UIEndedFrame](),
}

func init() {
	for _, k := range pifleetKinds {
		addKind(registry, k)
	}
}
