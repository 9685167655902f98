package serverstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"example.com/pifleet/internal/boltfile"
	"github.com/rs/zerolog"
	bolt "go.etcd.io/bbolt"
)

// FileName is the state file's name inside the server's state directory.
const FileName = "server.db"

// TrustBucket is the bucket reserved in the same file for the trust store
// of transport/trust: trust.New(st.DB(), serverstore.TrustBucket).
const TrustBucket = "trust"

// layoutVersion is the version of the buckets and records below; a file
// with another version is refused rather than misread.
const layoutVersion = "1"

// allBuckets are created when the file is opened.
var allBuckets = [][]byte{bucketTasks, bucketInstances, bucketDeliveries, bucketPendingIdx, bucketNotifiedIdx, bucketProjections, bucketAgents}

// Bucket names. TrustBucket is not among them: trust creates its own.
var (
	bucketMeta        = boltfile.MetaBucket
	bucketTasks       = []byte("tasks")
	bucketInstances   = []byte("instances")
	bucketDeliveries  = []byte("deliveries")
	bucketPendingIdx  = []byte("deliveries.pending")
	bucketNotifiedIdx = []byte("deliveries.notified")
	bucketProjections = []byte("projections")
	bucketAgents      = []byte("agents")

	keyNotifiedCount = []byte("notifiedCount")
)

// Defaults.
const (
	// DefaultLockTimeout is how long Open waits for another process to
	// release the state file before failing with ErrLocked.
	DefaultLockTimeout = 2 * time.Second
	// DefaultDedupeKeys is how many notified task_done keys are kept at
	// most (see the package documentation on pruning).
	DefaultDedupeKeys = 100_000
	// DefaultDedupeAge is how long a notified task_done key is kept at
	// most.
	DefaultDedupeAge = 30 * 24 * time.Hour
)

// Store is the server's state file. Its methods are safe for concurrent
// use; each change is one transaction, committed (and fsynced) before the
// method returns.
type Store struct {
	db        *bolt.DB
	path      string
	now       func() time.Time
	log       zerolog.Logger
	retention Retention
	w         *writer
	waitCheck func()
}

// Retention bounds the task_done dedupe keys kept after notification: a
// key is pruned once it is older than MaxAge (measured from its
// notification) or once MaxKeys newer notified keys exist. Keys whose
// notification is pending are never pruned.
type Retention struct {
	MaxKeys int
	MaxAge  time.Duration
}

type options struct {
	now         func() time.Time
	log         zerolog.Logger
	lockTimeout time.Duration
	reset       func(movedTo string, cause error)
	retention   Retention
	waitCheck   func()
}

// Option configures Open.
type Option func(*options)

// WithClock injects the clock that stamps records and ages dedupe keys
// (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

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

// WithRetention sets the dedupe key bounds (default DefaultDedupeKeys and
// DefaultDedupeAge). Open refuses a MaxKeys below 1 or a MaxAge of zero or
// less.
func WithRetention(r Retention) Option { return func(o *options) { o.retention = r } }

// WithWaitCheck sets a function called before every wait for a commit
// (Pending.Wait, and so every method that changes the store), on the
// waiting goroutine: a caller's check that it holds no lock others need
// while it waits for the disk.
func WithWaitCheck(check func()) Option { return func(o *options) { o.waitCheck = check } }

// Open opens (creating if needed) the state file FileName in dir, creating
// dir with mode 0700 if it is missing, and prunes dedupe keys past their
// retention. Only one process may have the file open: a second Open fails
// with ErrLocked after the lock timeout.
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{
		now:         time.Now,
		log:         zerolog.Nop(),
		lockTimeout: DefaultLockTimeout,
		retention:   Retention{MaxKeys: DefaultDedupeKeys, MaxAge: DefaultDedupeAge},
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.retention.MaxKeys < 1 {
		return nil, &InvalidError{Field: "retention.MaxKeys", Reason: fmt.Sprintf("%d, must be at least 1", o.retention.MaxKeys)}
	}
	if o.retention.MaxAge <= 0 {
		return nil, &InvalidError{Field: "retention.MaxAge", Reason: fmt.Sprintf("%v, must be positive", o.retention.MaxAge)}
	}
	db, err := boltfile.Open(boltfile.Spec{Dir: dir, File: FileName, Layout: layoutVersion, Buckets: allBuckets,
		LockTimeout: o.lockTimeout, Verify: verify, ResetCorrupt: o.reset != nil, OnReset: o.reset})
	if err != nil {
		return nil, boltfile.Named("serverstore", err)
	}
	if err := initSpawns(db); err != nil {
		return nil, errors.Join(fmt.Errorf("serverstore: %w", err), db.Close())
	}
	path := filepath.Join(dir, FileName)
	s := &Store{db: db, path: path, now: o.now, log: o.log, retention: o.retention, waitCheck: o.waitCheck}
	s.startWriter()
	if _, err := s.Prune(); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// Path returns the state file's path.
func (s *Store) Path() string { return s.path }

// DB returns the open database, for other stores that keep their buckets
// in the same file (the trust store, under TrustBucket). They must not
// touch this package's buckets, and must not close it.
func (s *Store) DB() *bolt.DB { return s.db }

// Close commits the changes still queued and closes the state file;
// changes queued later fail with ErrClosed.
func (s *Store) Close() error {
	s.stopWriter()
	return s.db.Close()
}

// stamp returns the current time as stored: UTC, without the monotonic
// reading.
func (s *Store) stamp() time.Time { return s.now().UTC().Round(0) }

// Tx is one transaction over the store's records, for changes that must
// happen together (a task's review state and its instance's state, say).
// It is valid only inside the function given to Update, View or
// RecordTaskDone.
type Tx struct {
	s  *Store
	tx *bolt.Tx
}

// Update runs fn in one read-write transaction, after every change queued
// before it (see Queue), and returns once it is committed: every change fn
// makes is committed together when it returns nil, and none when it
// returns an error (which Update returns). fn may run more than once, as
// for Queue.
func (s *Store) Update(fn func(*Tx) error) error {
	return s.Queue(fn, nil).Wait()
}

// UpdateBolt is Update for a bucket of the same file kept by another
// package, the trust store's (trust.WithWrites): fn gets the bbolt
// transaction itself, and its change joins the write queue like any other.
func (s *Store) UpdateBolt(fn func(*bolt.Tx) error) error {
	return s.Update(func(t *Tx) error { return fn(t.tx) })
}

// View runs fn in one read-only transaction, which sees one consistent
// version of the store. Writing through it fails.
func (s *Store) View(fn func(*Tx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(&Tx{s: s, tx: tx}) })
}

// getCounter reads a uint64 kept under key in the meta bucket.
func getCounter(tx *bolt.Tx, key []byte) (uint64, error) {
	v := tx.Bucket(bucketMeta).Get(key)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	default:
		return 0, &CorruptError{Bucket: string(bucketMeta), Key: string(key), Err: fmt.Errorf("%d bytes, want 8", len(v))}
	}
}

func putCounter(tx *bolt.Tx, key []byte, n uint64) error {
	return tx.Bucket(bucketMeta).Put(key, binary.BigEndian.AppendUint64(nil, n))
}
