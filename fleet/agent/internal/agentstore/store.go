package agentstore

import (
	"path/filepath"
	"time"

	"example.com/pifleet/internal/boltfile"
	"github.com/jpillora/backoff"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// FileName is the state file's name inside the state directory.
const FileName = "agent.db"

// layoutVersion is the version of the buckets and records below; a file
// with another version is refused rather than misread.
const layoutVersion = "1"

// allBuckets are created when the file is opened.
var allBuckets = [][]byte{bucketOutbox, bucketInstances, bucketKV}

// Bucket names.
var (
	bucketMeta      = boltfile.MetaBucket
	bucketOutbox    = []byte("outbox")
	bucketInstances = []byte("instances")
	bucketKV        = []byte("kv")

	keyLastSeq = []byte("lastSeq")
)

// DefaultLockTimeout is how long Open waits for another process to release
// the state file before failing with ErrLocked.
const DefaultLockTimeout = 2 * time.Second

// RetryPolicy gives the delay before the next delivery attempt of an
// unacknowledged entry that was already sent attempt+1 times.
// *backoff.Backoff (jpillora) satisfies it; ForAttempt must be safe for
// concurrent use and must not depend on hidden state.
type RetryPolicy interface {
	ForAttempt(attempt float64) time.Duration
}

// DefaultRetryPolicy re-sends an unacknowledged task_done after 2 s, 4 s,
// 8 s … capped at one minute, without jitter.
func DefaultRetryPolicy() RetryPolicy {
	return &backoff.Backoff{Min: 2 * time.Second, Max: time.Minute, Factor: 2}
}

// Store is the agent's state file. Its methods are safe for concurrent
// use; each one is a single transaction.
type Store struct {
	db     *bolt.DB
	path   string
	now    func() time.Time
	policy RetryPolicy
	log    zerolog.Logger
}

type options struct {
	now         func() time.Time
	policy      RetryPolicy
	log         zerolog.Logger
	lockTimeout time.Duration
	reset       func(movedTo string, cause error)
}

// Option configures Open.
type Option func(*options)

// WithClock injects the wall clock used for seqs, timestamps and retry
// schedules (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithRetryPolicy sets the retry delays of unacknowledged entries (default
// DefaultRetryPolicy).
func WithRetryPolicy(p RetryPolicy) Option { return func(o *options) { o.policy = p } }

// WithLogger sets the logger (default zerolog.Nop()).
func WithLogger(l zerolog.Logger) Option { return func(o *options) { o.log = l } }

// WithLockTimeout sets how long Open waits for the file lock (default
// DefaultLockTimeout).
func WithLockTimeout(d time.Duration) Option { return func(o *options) { o.lockTimeout = d } }

// WithResetCorrupt makes Open move a corrupt state file aside (to
// FileName.corrupt-<time>, next to it) and start with an empty one
// instead of failing with a *CorruptFileError; onReset (if not nil) hears
// where the old file went and why.
func WithResetCorrupt(onReset func(movedTo string, cause error)) Option {
	return func(o *options) {
		o.reset = onReset
		if o.reset == nil {
			o.reset = func(string, error) {}
		}
	}
}

// Open opens (creating if needed) the state file FileName in dir, creating
// dir with mode 0700 if it is missing. Only one process may have the file
// open: a second Open fails with ErrLocked after the lock timeout.
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{now: time.Now, policy: DefaultRetryPolicy(), log: zerolog.Nop(), lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	db, err := boltfile.Open(boltfile.Spec{Dir: dir, File: FileName, Layout: layoutVersion, Buckets: allBuckets,
		LockTimeout: o.lockTimeout, Verify: verify, ResetCorrupt: o.reset != nil, OnReset: o.reset})
	if err != nil {
		return nil, boltfile.Named("agentstore", err)
	}
	path := filepath.Join(dir, FileName)
	s := &Store{db: db, path: path, now: o.now, policy: o.policy, log: o.log}
	return s, nil
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.path }

// Close closes the state file. Every committed change is already on disk.
func (s *Store) Close() error { return s.db.Close() }
