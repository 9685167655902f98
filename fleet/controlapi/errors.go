package controlapi

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is the machine-readable kind of an API error.
type Code string

// Error codes and the HTTP status each is sent with.
const (
	CodeBadRequest       Code = "bad_request"        // 400: malformed body or argument
	CodeUnauthorized     Code = "unauthorized"       // 401: missing or wrong bearer token
	CodePolicyRefused    Code = "policy_refused"     // 403: the machine's trust policy forbids it
	CodeCSRFRefused      Code = "csrf_refused"       // 403: a browser request without its CSRF token, or from another site
	CodeUnknownInstance  Code = "unknown_instance"   // 404
	CodeUnknownTask      Code = "unknown_task"       // 404
	CodeUnknownAgent     Code = "unknown_agent"      // 404
	CodeUnknownUIRequest Code = "unknown_ui_request" // 404
	CodeUnknownBundle    Code = "unknown_bundle"     // 404
	CodeUnknownSession   Code = "unknown_session"    // 404: no session of the registry matches the reference
	CodeUnknownEndpoint  Code = "unknown_endpoint"   // 404: no such path or method
	CodeUnknownExecution Code = "unknown_execution"  // 404: no such running command
	CodeUnknownTool      Code = "unknown_tool"       // 404: no tool of that name in the catalogue
	CodeInvalidState     Code = "invalid_state"      // 409: not possible in the current state
	CodeSessionPinned    Code = "session_pinned"     // 409: attach to a pinned session (resume it as a clone)
	CodeSessionBusy      Code = "session_busy"       // 409: a live worker is attached to the session already
	CodeWorkerGone       Code = "worker_gone"        // 409: the worker died (exited, killed, shim lost)
	CodeModelPinned      Code = "model_pinned"       // 409: the worker's model is pinned (model unpin first)
	CodeSpawnError       Code = "spawn_error"        // 422: the agent refused the spawn (Detail: its code)
	CodeRebundleFailed   Code = "rebundle_failed"    // 422: the worker still runs its old bundle
	CodeExecRefused      Code = "exec_refused"       // 422: the agent would not run the command (Detail: exec_disabled, exec_failed, …)
	CodeDeliveryFailed   Code = "delivery_failed"    // 409: the work was not delivered, the task is still under review (Detail: merge_conflict, target_dirty, …)
	CodeFileError        Code = "file_error"         // 422: the agent's file service refused (Detail: its code)
	CodeWorkerRefused    Code = "worker_refused"     // 422: pi answered the command with an error (an unknown model, …)
	CodeAgentRefused     Code = "agent_refused"      // 403: trust refused the agent's machine (trust set NAME POLICY, then retry NAME)
	CodeNotSupported     Code = "not_supported"      // 501: the agent lacks the capability
	CodeNotConnected     Code = "not_connected"      // 503: the agent is not connected now
	CodeUnavailable      Code = "unavailable"        // 503: the server is shutting down
	CodeTimeout          Code = "timeout"            // 504: a tool call ran out of time (the work may go on)
	CodeInternal         Code = "internal"           // 500: anything else
)

// HTTPStatus is the status code an error of code c is sent with.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeBadRequest:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodePolicyRefused, CodeCSRFRefused:
		return http.StatusForbidden
	case CodeUnknownInstance, CodeUnknownTask, CodeUnknownAgent, CodeUnknownUIRequest, CodeUnknownBundle,
		CodeUnknownSession, CodeUnknownEndpoint, CodeUnknownExecution, CodeUnknownTool:
		return http.StatusNotFound
	case CodeInvalidState, CodeSessionPinned, CodeSessionBusy, CodeWorkerGone, CodeModelPinned, CodeDeliveryFailed:
		return http.StatusConflict
	case CodeSpawnError, CodeRebundleFailed, CodeExecRefused, CodeFileError, CodeWorkerRefused:
		return http.StatusUnprocessableEntity
	case CodeNotSupported:
		return http.StatusNotImplemented
	case CodeNotConnected, CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeTimeout:
		return http.StatusGatewayTimeout
	default:
		return http.StatusInternalServerError
	}
}

// Error is an API error: the JSON body of every non-2xx answer, and what
// the Client returns for one. errors.Is(err, ErrUnknownInstance) (and the
// other sentinels) matches any *Error of the same code.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Detail refines the code: the agent's spawn_error code
	// (platform_mismatch, max_workers, …) for spawn_error.
	Detail string `json:"detail,omitempty"`
	// Hint tells a model (or a person) what to do about it, when there is
	// something to say (the tool catalogue sets it).
	Hint string `json:"hint,omitempty"`
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Detail, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is matches a sentinel (an *Error with only a Code) of the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Detail == "" && t.Hint == "" && t.Code == e.Code
}

// Sentinels for errors.Is: each matches every *Error of its code.
var (
	ErrBadRequest       = &Error{Code: CodeBadRequest}
	ErrUnauthorized     = &Error{Code: CodeUnauthorized}
	ErrPolicyRefused    = &Error{Code: CodePolicyRefused}
	ErrCSRFRefused      = &Error{Code: CodeCSRFRefused}
	ErrUnknownInstance  = &Error{Code: CodeUnknownInstance}
	ErrUnknownTask      = &Error{Code: CodeUnknownTask}
	ErrUnknownAgent     = &Error{Code: CodeUnknownAgent}
	ErrUnknownUIRequest = &Error{Code: CodeUnknownUIRequest}
	ErrUnknownBundle    = &Error{Code: CodeUnknownBundle}
	ErrUnknownSession   = &Error{Code: CodeUnknownSession}
	ErrUnknownEndpoint  = &Error{Code: CodeUnknownEndpoint}
	ErrUnknownTool      = &Error{Code: CodeUnknownTool}
	ErrTimeout          = &Error{Code: CodeTimeout}
	ErrInvalidState     = &Error{Code: CodeInvalidState}
	ErrSessionPinned    = &Error{Code: CodeSessionPinned}
	ErrSessionBusy      = &Error{Code: CodeSessionBusy}
	ErrWorkerGone       = &Error{Code: CodeWorkerGone}
	ErrModelPinned      = &Error{Code: CodeModelPinned}
	ErrSpawn            = &Error{Code: CodeSpawnError}
	ErrRebundleFailed   = &Error{Code: CodeRebundleFailed}
	ErrExecRefused      = &Error{Code: CodeExecRefused}
	ErrDeliveryFailed   = &Error{Code: CodeDeliveryFailed}
	ErrUnknownExecution = &Error{Code: CodeUnknownExecution}
	ErrFileError        = &Error{Code: CodeFileError}
	ErrWorkerRefused    = &Error{Code: CodeWorkerRefused}
	ErrAgentRefused     = &Error{Code: CodeAgentRefused}
	ErrNotSupported     = &Error{Code: CodeNotSupported}
	ErrNotConnected     = &Error{Code: CodeNotConnected}
	ErrUnavailable      = &Error{Code: CodeUnavailable}
	ErrInternal         = &Error{Code: CodeInternal}
)

func badRequest(format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// asAPIError turns any error of a Backend into the *Error sent to the
// client.
func asAPIError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Message == "" {
			// A bare sentinel (or one wrapped): keep the wrapping text.
			return &Error{Code: e.Code, Message: err.Error(), Detail: e.Detail, Hint: e.Hint}
		}
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// ErrNotRunning is matched by every *NotRunningError.
var ErrNotRunning = errors.New("controlapi: server not running")

// NotRunningError reports that nothing answers at the API address: the
// server is not started, or listens elsewhere.
type NotRunningError struct {
	Addr string
	Err  error
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("pifleet-server is not running at %s (start it with pifleet-server serve)", e.Addr)
}

// Is makes errors.Is(err, ErrNotRunning) true.
func (e *NotRunningError) Is(target error) bool { return target == ErrNotRunning }

// Unwrap returns the dial error.
func (e *NotRunningError) Unwrap() error { return e.Err }

// ErrNotLoopback is matched by every *NotLoopbackError.
var ErrNotLoopback = errors.New("controlapi: address is not loopback")

// NotLoopbackError refuses a TCP listen address outside loopback without
// ListenOptions.AllowRemote.
type NotLoopbackError struct{ Addr string }

func (e *NotLoopbackError) Error() string {
	return fmt.Sprintf("controlapi: refusing to listen on %s: not a loopback address (allow it explicitly to expose the control API)", e.Addr)
}

// Is makes errors.Is(err, ErrNotLoopback) true.
func (e *NotLoopbackError) Is(target error) bool { return target == ErrNotLoopback }

// ErrBadAddr is matched by every *AddrError.
var ErrBadAddr = errors.New("controlapi: bad address")

// AddrError names an API address that cannot be parsed.
type AddrError struct {
	Addr, Reason string
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("controlapi: bad address %q: %s (want unix:PATH, an absolute socket path, or HOST:PORT)", e.Addr, e.Reason)
}

// Is makes errors.Is(err, ErrBadAddr) true.
func (e *AddrError) Is(target error) bool { return target == ErrBadAddr }
