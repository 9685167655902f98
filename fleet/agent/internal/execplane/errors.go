package execplane

import "errors"

// Why a start is refused (StartError.Code). The agent answers each with
// error {code:"exec_failed"} (reference 1.8); the code is for tests and
// logs.
const (
	CodeCapacity     = "capacity"
	CodeBadRequest   = "bad_request"
	CodeBadCwd       = "bad_cwd"
	CodeOutsideRoots = "outside_roots"
	CodeAudit        = "audit_failed"
	CodeClosed       = "closed"
)

// StartError is a refused start.
type StartError struct {
	Code, Message string
}

func (e *StartError) Error() string { return e.Message }

// ErrUnknownExec: Abort of an execution that is not running.
var ErrUnknownExec = errors.New("no running execution")
