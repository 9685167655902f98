package transport

import (
	"errors"
	"fmt"
)

// ErrorCode is a protocol error code, as carried in an error frame's code
// field when a record cannot be decoded. ErrorCode values are errors
// themselves, so errors.Is(err, CodeSchemaViolation) tells what went wrong
// with any error this package returns for a bad record.
type ErrorCode string

// The protocol error codes, in the order the checks run
// (except CodeFrameTooLarge, which is checked before all others).
const (
	CodeInvalidJSON        ErrorCode = "invalid_json"
	CodeNotAnObject        ErrorCode = "not_an_object"
	CodeUnknownFrameType   ErrorCode = "unknown_frame_type"
	CodeUnsupportedVersion ErrorCode = "unsupported_version"
	CodeSchemaViolation    ErrorCode = "schema_violation"
	CodeFrameTooLarge      ErrorCode = "frame_too_large"
)

// Error returns the code itself.
func (c ErrorCode) Error() string { return string(c) }

// ProtocolError reports one record that is not a valid frame. Decoding goes
// on after it: the record is dropped whole and the next one is read.
type ProtocolError struct {
	// Code says which check failed.
	Code ErrorCode
	// Message is the human-readable text sent in the error frame, e.g.
	// "invalid spawn frame at /bundle: must be string".
	Message string
	// FrameType is the record's type when it was a string (set for
	// unknown_frame_type, unsupported_version and schema_violation).
	FrameType string
}

// Error returns "code: message".
func (e *ProtocolError) Error() string {
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, code) true for the error's own code.
func (e *ProtocolError) Is(target error) bool {
	c, ok := target.(ErrorCode)
	return ok && c == e.Code
}

// ErrorFrame returns the error frame that answers this record on a live
// connection: {code, message}, no id and no frameType.
func (e *ProtocolError) ErrorFrame() *ErrorFrame {
	return &ErrorFrame{Code: string(e.Code), Message: e.Message}
}

// EncodeError reports a frame that cannot be written: a raw JSON field that
// is not one valid JSON value, or a number that JSON cannot represent.
type EncodeError struct {
	FrameType string
	// Path is the JSON pointer of the offending field ("/event").
	Path string
	// Reason says what is wrong with it.
	Reason string
}

// Error says which field of which frame could not be encoded.
func (e *EncodeError) Error() string {
	return fmt.Sprintf("transport: cannot encode %s frame at %s: %s", e.FrameType, e.Path, e.Reason)
}

// RemoteError is an error frame received as the answer to a Request.
type RemoteError struct {
	Code    string
	Message string
}

// Error quotes the peer's code and message.
func (e *RemoteError) Error() string {
	return fmt.Sprintf("peer answered error %s: %s", e.Code, e.Message)
}

// ErrDenied marks an identity or trust refusal. An Authenticate hook or a
// Gate wraps it (fmt.Errorf("%w: ...", ErrDenied)) to say "never retry":
// a Redialer then ends in the rejected state instead of redialling.
var ErrDenied = errors.New("peer denied")
