package worker

import (
	"errors"
	"fmt"
)

var (
	// ErrGone: the worker's shim is not there any more (Adopt). The
	// daemon reports the instance lost, with its session path (resumable).
	ErrGone = errors.New("worker: shim gone")
	// ErrModelPinned: a set_model or cycle_model was refused because the
	// model is pinned.
	ErrModelPinned = errors.New("worker: model is pinned")
	// ErrBadCommand: Send was given something that is not a JSON object
	// with a string "type".
	ErrBadCommand = errors.New("worker: bad rpc command")
	// ErrUnknownDialog: AnswerUI for a dialog that is not waiting.
	ErrUnknownDialog = errors.New("worker: no such dialog waiting")
	// ErrNotRunning: the worker process has ended (or the Worker was
	// detached).
	ErrNotRunning = errors.New("worker: not running")
	// ErrNoSession: Restart of a worker without a session file.
	ErrNoSession = errors.New("worker: no session file to restart with")
	// ErrInvalidSpec: a Spec field is wrong (see *SpecError).
	ErrInvalidSpec = errors.New("worker: invalid spec")
)

// SpecError names the wrong Spec field. It matches ErrInvalidSpec.
type SpecError struct {
	Field, Reason string
}

func (e *SpecError) Error() string { return fmt.Sprintf("worker: invalid %s: %s", e.Field, e.Reason) }

// Is makes a SpecError match ErrInvalidSpec.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

// StartError is a worker that ended before it answered its first
// get_state; it carries the exit and the stderr tail.
type StartError struct {
	Exit Exit
}

func (e *StartError) Error() string {
	return fmt.Sprintf("worker: exited before it was ready (code %d, signal %q): %s", e.Exit.Code, e.Exit.Signal, e.Exit.StderrTail)
}

// RestartError reports a Restart whose new spec did not start. Restored
// tells whether the worker runs again on its previous spec (same session,
// same event stream); when not, it has exited.
type RestartError struct {
	InstanceID string
	Err        error
	Restored   bool
}

func (e *RestartError) Error() string {
	if e.Restored {
		return fmt.Sprintf("worker %s: restart: %v (running again as before)", e.InstanceID, e.Err)
	}
	return fmt.Sprintf("worker %s: restart: %v", e.InstanceID, e.Err)
}

func (e *RestartError) Unwrap() error { return e.Err }
