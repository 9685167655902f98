package pirpc

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnsupported is matched (errors.Is) by the error of a command this pi
// does not know: pi answers "Unknown command: X", without the command's id.
// Callers treat such a command as an optional capability of newer pi
// releases (get_entries, get_tree, clear_queue, …).
var ErrUnsupported = errors.New("pirpc: command not supported by this pi")

// ErrClosed is returned by calls on a Client whose worker stream has ended
// (the worker exited or Close was called).
var ErrClosed = errors.New("pirpc: client closed")

// ErrEmbeddedNewline rejects a raw command that contains a line feed: pi
// would read it as two records.
var ErrEmbeddedNewline = errors.New("pirpc: command contains a line feed")

// CommandError is pi's answer success:false to a command.
type CommandError struct {
	// Command is the command type pi names in its response.
	Command string
	// Message is pi's error text.
	Message string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("pi %s: %s", e.Command, e.Message)
}

// Unsupported reports whether pi did not know the command.
func (e *CommandError) Unsupported() bool {
	return strings.HasPrefix(e.Message, "Unknown command: ")
}

// Is makes errors.Is(err, ErrUnsupported) true for an unknown command.
func (e *CommandError) Is(target error) bool {
	return target == ErrUnsupported && e.Unsupported()
}

// RecordError reports a stdout line that is not a pi record (not a JSON
// object with a string "type", or a response with a malformed envelope).
type RecordError struct {
	// Raw is the start of the line (at most 200 bytes).
	Raw []byte
	Err error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("pirpc: not a pi record (%v): %q", e.Err, e.Raw)
}

func (e *RecordError) Unwrap() error { return e.Err }
