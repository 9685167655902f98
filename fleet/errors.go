package fleet

import (
	"errors"
	"fmt"
	"strings"

	"example.com/pifleet/internal/boltfile"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
)

// Errors that callers test for with errors.Is.
var (
	// ErrCorruptState: the state file exists but cannot be trusted (empty,
	// truncated, damaged, or holding a record that does not decode). The
	// error names the file and what to do; see Config.ResetCorruptState.
	ErrCorruptState = boltfile.ErrCorrupt
	// ErrClosed: the fleet was closed (or never started).
	ErrClosed = errors.New("fleet: closed")
	// ErrAgentRefused: trust refused the agent's machine (no stored
	// decision and no prompter, a deny policy, or a failed whois); it is
	// not dialled again until its policy changes and Retry is called.
	ErrAgentRefused = errors.New("fleet: agent refused by trust")
	// ErrWrongMachine: the peer at an agent's address is not that agent
	// (whois names another machine), or it cannot be identified.
	ErrWrongMachine = errors.New("fleet: not the machine expected")
	// ErrUnknownAgent: no agent of that name is in the directory.
	ErrUnknownAgent = errors.New("fleet: unknown agent")
	// ErrUnknownInstance: no instance with that id is tracked.
	ErrUnknownInstance = errors.New("fleet: unknown instance")
	// ErrUnknownTask: no task with that id is tracked.
	ErrUnknownTask = errors.New("fleet: unknown task")
	// ErrNotConnected: the agent has no established connection now.
	ErrNotConnected = errors.New("fleet: agent not connected")
	// ErrInvalidState: the instance or task is in a state where the
	// operation is not possible (a *StateError carries the details).
	ErrInvalidState = errors.New("fleet: operation not valid in this state")
	// ErrInstanceEnded: the instance stopped or failed while the caller
	// waited for it, or before the call (an *InstanceEndedError).
	ErrInstanceEnded = errors.New("fleet: instance ended")
	// ErrWorkerGone: the worker died (its process exited or its shim was
	// lost) without anybody stopping it; matched by every
	// *WorkerGoneError, which also matches ErrInstanceEnded.
	ErrWorkerGone = errors.New("fleet: worker gone")
	// ErrPromptLost: a task's prompt never reached its worker (the
	// connection broke with it in flight) and the task ended failed;
	// submit it again.
	ErrPromptLost = errors.New("fleet: task failed: its prompt was lost")
	// ErrSpawn is matched by every *SpawnError.
	ErrSpawn = errors.New("fleet: spawn refused by the agent")
	// ErrSpawnStopped: the instance was stopped (Stop on its spawn id)
	// before its worker was up; matched by every *SpawnStoppedError,
	// which also matches ErrInstanceEnded.
	ErrSpawnStopped = errors.New("fleet: spawn stopped")
	// ErrFileService is matched by every *FileError.
	ErrFileService = errors.New("fleet: file service error")
	// ErrRebundle is matched by every *RebundleError.
	ErrRebundle = errors.New("fleet: rebundle failed")
	// ErrInvalidConfig is matched by every *ConfigError.
	ErrInvalidConfig = errors.New("fleet: invalid configuration")
	// ErrNotSupported: the agent does not speak the pifleet additions the
	// operation needs (its hello lacks the pifleet-v1 capability).
	ErrNotSupported = errors.New("fleet: agent does not support this operation")
	// ErrBadDisposition is matched by every *DispositionError.
	ErrBadDisposition = errors.New("fleet: unknown disposition")
	// ErrUnknownUIRequest: no pending worker dialog with that id.
	ErrUnknownUIRequest = errors.New("fleet: unknown ui request")
	// ErrUIRequestExpired: the dialog ended without an answer (its own
	// timeout passed and pi answered it itself, or its agent reported it
	// ended); an answer now would be ignored.
	ErrUIRequestExpired = errors.New("fleet: dialog already ended without an answer")
	// ErrUnknownSession is matched by every *UnknownSessionError.
	ErrUnknownSession = errors.New("fleet: unknown session")
	// ErrSessionPinned: attaching to a pinned session (a baseline) is
	// refused: its bytes must never change. Resume it as a
	// clone.
	ErrSessionPinned = errors.New("fleet: session is pinned")
	// ErrSessionBusy: a live instance is attached to the session already;
	// two workers appending to one file would interleave two trees.
	ErrSessionBusy = errors.New("fleet: session in use")
	// ErrUnexpectedAnswer: the agent answered a request with a frame of
	// another type than the request's answer (a protocol fault of the
	// agent); matched by every *UnexpectedAnswerError.
	ErrUnexpectedAnswer = errors.New("fleet: unexpected answer from the agent")
	// ErrModelPinned: the worker's model is pinned (its bundle's
	// model.pin, or PinModel), so the agent refused to switch it. The
	// agent's answer is wrapped too (a *transport.RemoteError).
	ErrModelPinned = errors.New("fleet: model is pinned")
)

// WorkerGoneError says that an instance's worker ended without being
// stopped: what a caller waiting on it (Prompt, Run.Wait, Task.Wait, RPC)
// gets at once.
type WorkerGoneError struct {
	InstanceID string
	// Reason says how it ended, as the agent told: "exited with code 3",
	// "killed by signal KILL", "shim lost", or what a reconnect showed.
	Reason string
}

func (e *WorkerGoneError) Error() string {
	return fmt.Sprintf("fleet: worker of instance %s is gone: %s", e.InstanceID, e.Reason)
}

// Is makes errors.Is(err, ErrWorkerGone) and errors.Is(err,
// ErrInstanceEnded) true.
func (e *WorkerGoneError) Is(target error) bool {
	return target == ErrWorkerGone || target == ErrInstanceEnded
}

// UnknownSessionError: no session of the registry matches Ref (a path, a
// session id or a name) on Machine (any machine when empty).
type UnknownSessionError struct {
	Ref, Machine string
}

func (e *UnknownSessionError) Error() string {
	what := "unknown session: " + e.Ref
	if name, ok := strings.CutPrefix(e.Ref, session.BaselinePrefix); ok {
		what = "unknown baseline: " + name
	}
	if e.Machine != "" {
		what += " (on " + e.Machine + ")"
	}
	return "fleet: " + what
}

// Is makes errors.Is(err, ErrUnknownSession) true.
func (e *UnknownSessionError) Is(target error) bool { return target == ErrUnknownSession }

// InstanceEndedError refuses an operation on an instance that has ended
// (stopped, or its worker gone): nothing can be asked of its worker any
// more. It matches ErrInstanceEnded and ErrInvalidState, and, when the
// worker died, ErrWorkerGone (Gone says how; errors.As finds it).
type InstanceEndedError struct {
	InstanceID string
	State      InstanceState
	Gone       *WorkerGoneError
}

func (e *InstanceEndedError) Error() string {
	msg := fmt.Sprintf("fleet: instance %s has ended (%s): its worker takes no more requests", e.InstanceID, e.State)
	if e.Gone != nil {
		msg += "; it is gone: " + e.Gone.Reason
	}
	return msg
}

// Is makes errors.Is(err, ErrInstanceEnded) and errors.Is(err,
// ErrInvalidState) true.
func (e *InstanceEndedError) Is(target error) bool {
	return target == ErrInstanceEnded || target == ErrInvalidState
}

// Unwrap is the *WorkerGoneError of a worker that died, else nil.
func (e *InstanceEndedError) Unwrap() error {
	if e.Gone == nil {
		return nil
	}
	return e.Gone
}

// SpawnError is the agent's refusal of a spawn: the spawn_error code
// (max_workers, spawn_failed, platform_mismatch, pin_mismatch,
// no_usable_model, …) and message, or an error frame's code when the agent
// answered spawn with one.
type SpawnError struct {
	Agent   string
	Bundle  string
	Code    string
	Message string
}

func (e *SpawnError) Error() string {
	return fmt.Sprintf("fleet: spawn of bundle %q on %s refused: %s: %s", e.Bundle, e.Agent, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrSpawn) true.
func (e *SpawnError) Is(target error) bool { return target == ErrSpawn }

// SpawnStoppedError is what Spawn returns when the instance was stopped
// while it was being spawned: the agent gave the spawn up, or stopped the
// worker it had just started.
type SpawnStoppedError struct {
	Agent, Bundle string
	// SpawnID is the id the instance went by during its spawn.
	SpawnID string
}

func (e *SpawnStoppedError) Error() string {
	return fmt.Sprintf("fleet: spawn %s of bundle %q on %s was stopped before its worker was up", e.SpawnID, e.Bundle, e.Agent)
}

// Is makes errors.Is(err, ErrSpawnStopped) and errors.Is(err,
// ErrInstanceEnded) true.
func (e *SpawnStoppedError) Is(target error) bool {
	return target == ErrSpawnStopped || target == ErrInstanceEnded
}

// DispositionError names a disposition that an accept (Task.Accept, or
// Task.Decide accepting) does not know: neither stop nor keep_idle.
type DispositionError struct {
	Disposition transport.Disposition
}

func (e *DispositionError) Error() string {
	return fmt.Sprintf("fleet: disposition %q is neither %s nor %s", e.Disposition, transport.DispositionStop, transport.DispositionKeepIdle)
}

// Is makes errors.Is(err, ErrBadDisposition) true.
func (e *DispositionError) Is(target error) bool { return target == ErrBadDisposition }

// StateError reports an operation the instance's (or task's) current
// state does not allow.
type StateError struct {
	// Kind is "instance" or "task"; ID names it.
	Kind, ID string
	// State is its current state; Op the refused operation.
	State, Op string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("fleet: cannot %s %s %s in state %s", e.Op, e.Kind, e.ID, e.State)
}

// Is makes errors.Is(err, ErrInvalidState) true.
func (e *StateError) Is(target error) bool { return target == ErrInvalidState }

// FileError is an error answer of the agent's file service (fs_result
// error): unknown_instance, path_escape, not_found, not_a_file, too_large,
// bad_pattern, git_failed.
type FileError struct {
	Op      string
	Code    string
	Message string
}

func (e *FileError) Error() string {
	return fmt.Sprintf("fleet: %s: %s: %s", e.Op, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrFileService) true.
func (e *FileError) Is(target error) bool { return target == ErrFileService }

// RebundleError reports a rebundle the agent did not carry out: the worker
// still runs Bundle.
type RebundleError struct {
	InstanceID string
	// Bundle is what the worker still runs; Target what was asked.
	Bundle, Target string
	Code, Message  string
}

func (e *RebundleError) Error() string {
	return fmt.Sprintf("fleet: rebundle of %s to %q failed (%s: %s); it still runs %q", e.InstanceID, e.Target, e.Code, e.Message, e.Bundle)
}

// Is makes errors.Is(err, ErrRebundle) true.
func (e *RebundleError) Is(target error) bool { return target == ErrRebundle }

// ConfigError names one option of New that is out of range.
type ConfigError struct {
	Field, Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("fleet: invalid %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// AgentRefusedError reports an agent that trust refused
// (errors.Is(err, ErrAgentRefused)): Reason is the refusal, as in
// AgentStatus.LastError.
type AgentRefusedError struct {
	Agent, Reason string
}

func (e *AgentRefusedError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrAgentRefused, e.Agent, e.Reason)
}

// Is makes errors.Is(err, ErrAgentRefused) true.
func (e *AgentRefusedError) Is(target error) bool { return target == ErrAgentRefused }

// UnexpectedAnswerError reports an agent that answered Request with a
// frame of type Got where a Want frame was due: nothing of the answer is
// used.
type UnexpectedAnswerError struct {
	Request, Want, Got string
}

func (e *UnexpectedAnswerError) Error() string {
	return fmt.Sprintf("fleet: %s answered with %s, not %s", e.Request, e.Got, e.Want)
}

// Is makes errors.Is(err, ErrUnexpectedAnswer) true.
func (e *UnexpectedAnswerError) Is(target error) bool { return target == ErrUnexpectedAnswer }

// wrongAnswer is the error of an agent that answered request with got
// where a frame of want's type was due (want may be a nil frame pointer).
func wrongAnswer(request string, want, got transport.Frame) *UnexpectedAnswerError {
	return &UnexpectedAnswerError{Request: request, Want: want.FrameType(), Got: got.FrameType()}
}
