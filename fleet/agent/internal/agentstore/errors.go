package agentstore

import (
	"errors"
	"fmt"

	"example.com/pifleet/internal/boltfile"
)

var (
	// ErrNotFound reports a record that does not exist.
	ErrNotFound = errors.New("agentstore: not found")
	// ErrLocked reports a state file another process holds open (another
	// agent on the same state directory).
	ErrLocked = boltfile.ErrLocked
	// ErrInvalid is matched (errors.Is) by every *InvalidError.
	ErrInvalid = errors.New("agentstore: invalid input")
	// ErrSeqExhausted reports that no seq below MaxSeq is left. It cannot
	// happen with a sane clock (2^53 ms is 285,000 years).
	ErrSeqExhausted = errors.New("agentstore: seq space exhausted")
	// ErrCorrupt is matched by errors about a stored value that cannot be
	// decoded.
	ErrCorrupt = errors.New("agentstore: corrupt record")
)

// InvalidError reports input the store refuses, naming the field and why.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("agentstore: invalid %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

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

// CorruptError names a stored value that cannot be decoded; it matches
// ErrCorrupt.
type CorruptError struct {
	Bucket string
	Key    string
	Err    error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("agentstore: corrupt record %s/%s: %v", e.Bucket, e.Key, e.Err)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the decoding error.
func (e *CorruptError) Unwrap() error { return e.Err }
