package registry

import (
	"fmt"

	"example.com/pifleet/bundle"
)

// Error reports a registry request that failed. errors.Is(err, code) is
// true for its Code (bundle.CodeUnreachable, bundle.CodeNotFound or
// bundle.CodeInvalidManifest), and Unwrap gives the cause: for an invalid
// manifest, the *bundle.ManifestError or *bundle.UnsafePathsError.
type Error struct {
	Code bundle.ErrorCode
	// Registry is the registry's URL.
	Registry string
	// Bundle is the bundle asked for.
	Bundle string
	// Path is the bundle file asked for, when a file was.
	Path string
	// Status is the HTTP status, when one was received.
	Status int
	Err    error
}

func (e *Error) Error() string {
	what := fmt.Sprintf("bundle %q", e.Bundle)
	if e.Path != "" {
		what += fmt.Sprintf(" file %q", e.Path)
	}
	msg := fmt.Sprintf("registry %s: %s: %s", e.Registry, what, e.Code)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, e.Code) true.
func (e *Error) Is(target error) bool {
	c, ok := target.(bundle.ErrorCode)
	return ok && c == e.Code
}
