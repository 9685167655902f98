package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/bbolt"

	"example.com/pifleet/internal/boltfile"
)

// DefaultBucket is the bbolt bucket Open keeps decisions in.
const DefaultBucket = "trust"

// MaxMachineLen bounds a machine name: a DNS name is at most 253 bytes.
const MaxMachineLen = 253

// Errors that callers may test for with errors.Is.
var (
	// ErrBadMachine: a machine name is empty or too long.
	ErrBadMachine = errors.New("trust: bad machine name")
	// ErrCorrupt: a stored decision does not decode. A *CorruptError
	// carries the details.
	ErrCorrupt = errors.New("trust: corrupt stored decision")
)

// Decision is the stored policy of one machine.
type Decision struct {
	// Machine is the key: the machine name whois reports.
	Machine string `json:"machine"`
	// User is who owned the machine when the decision was made; empty
	// when unknown (set from the CLI for a machine never seen).
	User string `json:"user,omitempty"`
	// Key is the public key ("ed25519:…") the machine proved when the
	// decision was made (agents that dial in); empty when none was.
	Key string `json:"key,omitempty"`
	// Policy is what the machine may do.
	Policy Policy `json:"policy"`
	// DecidedAt is when the decision was made (UTC).
	DecidedAt time.Time `json:"decidedAt"`
}

// CorruptError reports a stored decision that does not decode
// (errors.Is(err, ErrCorrupt)). The store never writes one; it means the
// file was damaged or written by something else.
type CorruptError struct {
	Machine string
	Err     error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("trust: corrupt stored decision for %q: %v", e.Machine, e.Err)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the decoding error.
func (e *CorruptError) Unwrap() error { return e.Err }

// CorruptFileError reports a trust file that exists but cannot be
// trusted: empty, truncated or damaged. It names the file and what to do
// (restore it, or start afresh with WithResetCorrupt) and matches
// ErrCorruptFile. Open never starts empty on such a file: every decision
// would be forgotten, and a machine denied before would be asked about
// again.
type CorruptFileError = boltfile.CorruptError

// ErrCorruptFile is matched (errors.Is) by every *CorruptFileError.
var ErrCorruptFile = boltfile.ErrCorrupt

// Store keeps the server's per-machine trust decisions in bbolt and makes
// first-contact decisions (see Decide). Every change is committed in a
// bbolt transaction with fsync before the call returns: a decision that
// was acknowledged survives a kill -9 or a power cut, and a change is
// either fully stored or not at all (WithWrites may join changes in one
// transaction). It is safe for concurrent use.
type Store struct {
	db     *bbolt.DB
	update func(func(*bbolt.Tx) error) error // every write (WithWrites)
	bucket []byte
	owned  bool // Close closes db

	prompter Prompter
	now      func() time.Time
	log      zerolog.Logger

	mu      sync.Mutex
	flights map[string]*flight // machine → first-contact question in progress

	// reset, set by WithResetCorrupt, makes Open move a corrupt file
	// aside (nil: Open refuses it).
	reset func(movedTo string, cause error)
}

// Option configures a Store.
type Option func(*Store)

// WithPrompter sets who is asked about machines seen for the first time.
// Without one, unknown machines are refused (and nothing is stored), so
// that a server nobody watches stays closed.
func WithPrompter(p Prompter) Option { return func(s *Store) { s.prompter = p } }

// WithClock sets the clock that stamps decisions (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithWrites sets how the store commits its changes: update runs fn in a
// read-write transaction of the store's database and returns once it is
// committed, fn's error if fn failed. fn may run more than once (a write
// queue that joins changes and retries a failed group change by change);
// each run starts over. A server that keeps its other records in the same
// database passes its write queue, so that decisions made at the same
// moment, as when it meets many machines for the first time, share a
// transaction and its fsync with each other and with its other changes,
// instead of taking turns at the disk. The default is the database's own
// Update: one transaction per change.
func WithWrites(update func(fn func(*bbolt.Tx) error) error) Option {
	return func(s *Store) { s.update = update }
}

// WithLogger sets the logger (default zerolog.Nop()).
func WithLogger(l zerolog.Logger) Option { return func(s *Store) { s.log = l } }

// WithResetCorrupt makes Open move a corrupt trust file aside (to
// <name>.corrupt-<time>, next to it) and start with an empty one instead
// of failing with a *CorruptFileError; onReset (if not nil) hears where
// the old file went and why. Every decision the file held is forgotten:
// each machine is a first contact again. New ignores it.
func WithResetCorrupt(onReset func(movedTo string, cause error)) Option {
	return func(s *Store) {
		s.reset = onReset
		if s.reset == nil {
			s.reset = func(string, error) {}
		}
	}
}

// Open opens (creating if needed) a store in its own bbolt file at path,
// creating the directory too (mode 0700). Only one process may hold the
// file; Open fails after a second if another does.
//
// A file that exists is checked before it is used: one that is empty,
// truncated, damaged (bbolt's consistency check fails) or lacks the
// decisions' bucket is a *CorruptFileError naming it, left untouched,
// unless WithResetCorrupt is given. A new file is written complete under
// a temporary name and then linked into place, so that a crash while it
// is made leaves no empty file behind.
func Open(path string, opts ...Option) (*Store, error) {
	var o Store
	for _, opt := range opts {
		opt(&o)
	}
	db, err := boltfile.Open(boltfile.Spec{Dir: filepath.Dir(path), File: filepath.Base(path),
		Buckets: [][]byte{[]byte(DefaultBucket)}, LockTimeout: time.Second, Verify: verifyDecisions,
		ResetCorrupt: o.reset != nil, OnReset: o.reset, ResetHow: "trust.WithResetCorrupt"})
	if err != nil {
		return nil, boltfile.Named("trust", err)
	}
	s, err := New(db, DefaultBucket, opts...)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	s.owned = true
	return s, nil
}

// New keeps the store in bucket of an already open bbolt database, which
// may hold other buckets of the same server. Close leaves db open.
func New(db *bbolt.DB, bucket string, opts ...Option) (*Store, error) {
	if bucket == "" {
		return nil, errors.New("trust: empty bucket name")
	}
	s := &Store{
		db:       db,
		update:   db.Update,
		bucket:   []byte(bucket),
		prompter: noPrompter{},
		now:      time.Now,
		log:      zerolog.Nop(),
		flights:  make(map[string]*flight),
	}
	for _, opt := range opts {
		opt(s)
	}
	err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(s.bucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("trust: create bucket %q: %w", bucket, err)
	}
	return s, nil
}

// Close closes the database if Open opened it.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	return s.db.Close()
}

// Get returns the stored decision for machine; ok is false when there is
// none.
func (s *Store) Get(machine string) (d Decision, ok bool, err error) {
	if err := checkMachine(machine); err != nil {
		return Decision{}, false, err
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		d, ok, err = s.get(tx, machine)
		return err
	})
	return d, ok, err
}

func (s *Store) get(tx *bbolt.Tx, machine string) (Decision, bool, error) {
	raw := tx.Bucket(s.bucket).Get([]byte(machine))
	if raw == nil {
		return Decision{}, false, nil
	}
	d, err := decodeDecision(machine, raw)
	return d, err == nil, err
}

// Set stores policy p for machine, replacing any earlier decision, as the
// operator's `trust set MACHINE POLICY` does. The operator's word is for
// the machine: the user and key recorded earlier are cleared, and the
// machine's next connection records its own (this is also how a machine
// whose key or owner changed is admitted on a server with nobody to ask).
func (s *Store) Set(machine string, p Policy) (Decision, error) {
	if err := checkMachine(machine); err != nil {
		return Decision{}, err
	}
	if !p.Valid() {
		return Decision{}, &BadPolicyError{Policy: string(p)}
	}
	d := Decision{Machine: machine, Policy: p, DecidedAt: s.stamp()}
	err := s.update(func(tx *bbolt.Tx) error {
		// A corrupt old record is simply replaced: this is how an
		// operator repairs it.
		return s.put(tx, d)
	})
	if err != nil {
		return Decision{}, fmt.Errorf("trust: set %s: %w", machine, err)
	}
	s.log.Info().Str("machine", machine).Str("policy", string(p)).Msg("trust decision set")
	return d, nil
}

// Forget deletes the decision for machine, so that its next connection
// is a first contact again. It reports whether there was one.
func (s *Store) Forget(machine string) (bool, error) {
	if err := checkMachine(machine); err != nil {
		return false, err
	}
	var existed bool
	err := s.update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(s.bucket)
		existed = b.Get([]byte(machine)) != nil
		return b.Delete([]byte(machine))
	})
	if err != nil {
		return false, fmt.Errorf("trust: forget %s: %w", machine, err)
	}
	if existed {
		s.log.Info().Str("machine", machine).Msg("trust decision forgotten")
	}
	return existed, nil
}

// List returns every stored decision, sorted by machine name.
func (s *Store) List() ([]Decision, error) {
	var out []Decision
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(s.bucket).ForEach(func(k, v []byte) error {
			d, err := decodeDecision(string(k), v)
			if err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}

// replace stores d if the machine's decision is still before (nil: there
// is none), and returns the decision in force. An operator's `trust set`
// that lands while the first-contact question is open wins over the
// answer.
//
// The function given to update may run more than once (see WithWrites),
// so it starts over each time.
func (s *Store) replace(before *Decision, d Decision) (Decision, error) {
	var stored Decision
	err := s.update(func(tx *bbolt.Tx) error {
		stored = d
		old, ok, err := s.get(tx, d.Machine)
		if err != nil {
			return err
		}
		if ok != (before != nil) || (ok && old != *before) {
			stored = old
			return nil
		}
		return s.put(tx, d)
	})
	if err != nil {
		return Decision{}, fmt.Errorf("trust: store decision for %s: %w", d.Machine, err)
	}
	return stored, nil
}

func (s *Store) put(tx *bbolt.Tx, d Decision) error {
	raw, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return tx.Bucket(s.bucket).Put([]byte(d.Machine), raw)
}

func (s *Store) stamp() time.Time { return s.now().UTC().Round(0) }

// decodeDecision decodes the record stored under key machine.
// verifyDecisions reads every decision of a trust file once, at Open: a
// record that does not decode makes the file corrupt (damage that bbolt's
// own check does not see, inside a page), refused before any of it is
// used.
func verifyDecisions(tx *bbolt.Tx) error {
	return tx.Bucket([]byte(DefaultBucket)).ForEach(func(k, v []byte) error {
		if v == nil {
			return &CorruptError{Machine: string(k), Err: errors.New("a bucket where a decision belongs")}
		}
		_, err := decodeDecision(string(k), v)
		return err
	})
}

func decodeDecision(machine string, raw []byte) (Decision, error) {
	var d Decision
	if err := json.Unmarshal(raw, &d); err != nil {
		return Decision{}, &CorruptError{Machine: machine, Err: err}
	}
	if d.Machine != machine {
		return Decision{}, &CorruptError{Machine: machine, Err: fmt.Errorf("record names machine %q", d.Machine)}
	}
	if !d.Policy.Valid() {
		return Decision{}, &CorruptError{Machine: machine, Err: fmt.Errorf("%w %q", ErrBadPolicy, d.Policy)}
	}
	return d, nil
}

func checkMachine(machine string) error {
	switch {
	case machine == "":
		return fmt.Errorf("%w: empty", ErrBadMachine)
	case len(machine) > MaxMachineLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadMachine, len(machine), MaxMachineLen)
	}
	return nil
}
