package fsservice

import (
	"errors"
	"fmt"

	"example.com/pifleet/transport"
)

// Code is an fs_result error code. Codes are errors themselves, so
// errors.Is(err, CodePathEscape) tells what went wrong with any *Error.
type Code string

// The fs_result error codes of reference 1.8, then the pifleet additions.
const (
	CodeUnknownInstance Code = "unknown_instance" // the agent knows no such instance
	CodePathEscape      Code = "path_escape"      // the path resolves outside the root
	CodeNotFound        Code = "not_found"        // missing file, or fs_list of a non-directory
	CodeNotAFile        Code = "not_a_file"       // fs_read of something that is not a regular file
	CodeTooLarge        Code = "too_large"        // image over MaxImageBytes, or offset beyond the read limit
	CodeBadPattern      Code = "bad_pattern"      // fs_grep pattern is not a valid regular expression
	CodeGitFailed       Code = "git_failed"       // git exited non-zero, could not run, or the ref was refused
	CodeNotARepo        Code = "not_a_repo"       // fs_diff in a cwd that is not inside a git repository

	// CodeDisabled answers every request when the service's access mode is
	// AccessOff. A pifleet addition (AC-3.4a): the reference has no switch.
	CodeDisabled Code = "fs_disabled"
	// CodeIOError reports a failure other than "missing" (permission
	// denied, a read error). A pifleet addition.
	CodeIOError Code = "io_error"
	// CodeCanceled answers a request whose context ended before the answer
	// was complete. A pifleet addition.
	CodeCanceled Code = "canceled"
)

// Error returns the code itself.
func (c Code) Error() string { return string(c) }

// Error is one failed file-service request.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("fsservice: %s: %s", e.Code, e.Message) }

// Is makes errors.Is(err, code) true for the error's own code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

func errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ResultError returns the error an fs_result carries as an *Error, or nil
// when the result is a success.
func ResultError(res *transport.FsResultFrame) error {
	if res == nil || res.Error == nil {
		return nil
	}
	return &Error{Code: Code(res.Error.Code), Message: res.Error.Message}
}

// ErrorResult builds the fs_result that answers req with err: done:true,
// the request's id and traceId echoed. An err that is not an *Error is
// reported as io_error. The agent uses it for unknown_instance, which it
// decides before any Service is involved.
func ErrorResult(req transport.Frame, err error) *transport.FsResultFrame {
	var fe *Error
	if !errors.As(err, &fe) {
		fe = &Error{Code: CodeIOError, Message: err.Error()}
	}
	res := newResult(req)
	res.Error = &transport.FsError{Code: string(fe.Code), Message: fe.Message}
	return res
}

// newResult starts an answer to req: done, id and traceId echoed.
func newResult(req transport.Frame) *transport.FsResultFrame {
	res := &transport.FsResultFrame{Done: true}
	if req != nil {
		h := req.Envelope()
		res.ID, res.TraceID = h.ID, h.TraceID
	}
	return res
}
