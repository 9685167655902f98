package serverstore

import (
	"errors"
	"fmt"

	"example.com/pifleet/internal/boltfile"
)

var (
	// ErrNotFound reports a record that does not exist.
	ErrNotFound = errors.New("serverstore: not found")
	// ErrLocked reports a state file another process holds open (another
	// server on the same state directory).
	ErrLocked = boltfile.ErrLocked
	// ErrInvalid is matched (errors.Is) by every *InvalidError.
	ErrInvalid = errors.New("serverstore: invalid input")
	// ErrCorrupt is matched by every *CorruptError.
	ErrCorrupt = errors.New("serverstore: corrupt record")
	// ErrClosed reports a change made after Close.
	ErrClosed = errors.New("serverstore: closed")
)

// InvalidError reports input the store refuses, naming the field and why.
// Nothing is written.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("serverstore: invalid %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// CorruptError names a stored value that cannot be decoded or does not
// match its key. The store never writes one; it means the file was damaged
// or written by something else.
type CorruptError struct {
	Bucket string
	Key    string
	Err    error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("serverstore: corrupt record %s/%q: %v", e.Bucket, e.Key, e.Err)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the decoding error.
func (e *CorruptError) Unwrap() error { return e.Err }

// CorruptFileError reports a state file that exists but cannot be
// trusted (empty, truncated, damaged, or holding a record that does not
// decode); it names the file and what to do, and matches
// ErrCorruptFile.
type CorruptFileError = boltfile.CorruptError

// ErrCorruptFile is matched by every *CorruptFileError.
var ErrCorruptFile = boltfile.ErrCorrupt

// VersionError reports a state file written with another layout version;
// nothing in it is touched.
type VersionError = boltfile.VersionError
