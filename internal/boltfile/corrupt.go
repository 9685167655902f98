package boltfile

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ErrCorrupt is matched (errors.Is) by every *CorruptError.
var ErrCorrupt = errors.New("state file is corrupt")

// CorruptError reports a state file that exists but cannot be trusted:
// empty, truncated, not a bbolt file, failing bbolt's consistency check,
// missing a bucket, or holding a record that does not decode. The file is
// left as it is (unless Spec.ResetCorrupt moved it aside).
type CorruptError struct {
	// Path is the state file.
	Path string
	// Reason says what is wrong, in plain words.
	Reason string
	// Err is the underlying error, if any.
	Err error
	// ResetHow is how the user asks to start afresh, for the message
	// (empty: the daemons' --reset-state, ResetCorruptState in the Go
	// packages).
	ResetHow string
}

func (e *CorruptError) Error() string {
	reason := e.Reason
	if e.Err != nil {
		reason += ": " + e.Err.Error()
	}
	how := e.ResetHow
	if how == "" {
		how = "--reset-state (ResetCorruptState in the Go packages)"
	}
	return fmt.Sprintf("state file %s is corrupt (%s); it was left untouched. "+
		"Restore it from a backup, or start with an empty state: %s "+
		"moves it aside to %s.corrupt-<time>, losing what it held, and starts afresh", e.Path, reason, how, filepath.Base(e.Path))
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the underlying error.
func (e *CorruptError) Unwrap() error { return e.Err }

// Named prefixes err of Open with the name of the store that opened the
// file, except a *CorruptError, which names the file itself and is
// returned as it is: it is read by the user who must act on it.
func Named(store string, err error) error {
	var ce *CorruptError
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%s: %w", store, err)
}
