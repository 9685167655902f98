package session

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns for bad input wraps one
// of them, so callers can branch with errors.Is.
var (
	// ErrNoHeader: the file has no complete first line yet (it is empty or
	// pi is still writing it). Listing skips such a file and retries it on
	// the next pass; it is not corrupt.
	ErrNoHeader = errors.New("session: no complete header line")
	// ErrNotSession: the first line is not a pi session header
	// ({"type":"session",…}).
	ErrNotSession = errors.New("session: not a pi session header")
	// ErrUnsupportedVersion: the header's version has no entry ids (v1) or
	// is newer than this package understands.
	ErrUnsupportedVersion = errors.New("session: unsupported session file version")
	// ErrMalformedLine: a complete (LF-terminated) line is not a valid entry.
	ErrMalformedLine = errors.New("session: malformed line")
	// ErrLineTooLong: a line exceeds the configured cap (default 64 MiB).
	ErrLineTooLong = errors.New("session: line too long")
	// ErrDuplicateEntry: two entries of one file share an id.
	ErrDuplicateEntry = errors.New("session: duplicate entry id")
	// ErrUnknownEntry: a cursor's entry id is not in the file (the file was
	// rewritten or replaced); the caller falls back to a full read.
	ErrUnknownEntry = errors.New("session: unknown entry id")
	// ErrEmptyQuery: a search query is empty or only whitespace.
	ErrEmptyQuery = errors.New("session: empty search query")
	// ErrInvalidName: a baseline or task name cannot be built or parsed.
	ErrInvalidName = errors.New("session: invalid session name")
	// ErrInvalidReport: a sessions report is inconsistent (duplicate or
	// empty paths, pages out of order, unknown kind).
	ErrInvalidReport = errors.New("session: invalid sessions report")
	// ErrItemTooLarge: one item alone exceeds a page's byte budget.
	ErrItemTooLarge = errors.New("session: item larger than a page")
)

// LineError locates a problem in a session file: the 1-based line number
// (as an editor counts it) and the byte offset where that line starts.
// Err wraps one of the sentinels above.
type LineError struct {
	Path   string
	Line   int
	Offset int64
	Err    error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s: line %d (byte %d): %v", e.Path, e.Line, e.Offset, e.Err)
}

// Unwrap exposes the sentinel and its cause.
func (e *LineError) Unwrap() error { return e.Err }

// UnknownEntryError is returned by the entry cursor when the entry it
// should continue after cannot be found. errors.Is(err, ErrUnknownEntry).
type UnknownEntryError struct {
	Path    string
	EntryID string
	// Reason says why: "not found", "session id changed (file replaced)".
	Reason string
}

func (e *UnknownEntryError) Error() string {
	return fmt.Sprintf("%s: entry %q: %s", e.Path, e.EntryID, e.Reason)
}

// Is makes errors.Is(err, ErrUnknownEntry) true.
func (e *UnknownEntryError) Is(target error) bool { return target == ErrUnknownEntry }
