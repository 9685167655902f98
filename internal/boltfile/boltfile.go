// Package boltfile opens the bbolt state files of pifleet's daemons (the
// agent's and the server's): one file in a 0700 directory, mode 0600,
// locked against a second process, stamped with a layout version so that a
// file written by another layout is refused untouched, and with its
// buckets created.
//
// A file that exists but cannot be trusted — empty, truncated, not a bbolt
// file, failing bbolt's consistency check, missing a bucket, holding a
// record that does not decode — is refused with a *CorruptError naming it,
// never opened as an empty state and never a panic. Spec.ResetCorrupt
// moves such a file aside and starts afresh instead.
package boltfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrLocked reports a state file that another process holds open (another
// daemon on the same state directory).
var ErrLocked = errors.New("state file is locked by another process")

// VersionError reports a state file written with another layout version.
// Nothing in it is touched.
type VersionError struct {
	Path string
	Got  string
	Want string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("%s has layout version %q, this program reads %q", e.Path, e.Got, e.Want)
}

// MetaBucket holds the layout stamp (under LayoutKey) and whatever small
// counters the store keeps beside it.
var MetaBucket = []byte("meta")

// LayoutKey is the MetaBucket key of the layout stamp.
var LayoutKey = []byte("layout")

// Spec says which file to open and what it must contain.
type Spec struct {
	// Dir is created with mode 0700 when missing.
	Dir string
	// File is the file name inside Dir.
	File string
	// Layout is the version of the buckets and records; a new file is
	// stamped with it, an existing one must carry it. Empty: the file has
	// no stamp and no MetaBucket (a format that predates them, known by
	// its Buckets alone).
	Layout string
	// Buckets are created with a new file, and an existing file must have
	// every one of them (MetaBucket too, unless Layout is empty): a bucket
	// added to a layout later must be created by its store, not listed
	// here.
	Buckets [][]byte
	// LockTimeout is how long to wait for another process to release the
	// file before failing with ErrLocked.
	LockTimeout time.Duration
	// Verify, if set, reads every record at open and returns an error for
	// the first that does not decode: the file is then corrupt.
	Verify func(*bolt.Tx) error
	// ResetCorrupt moves a corrupt file aside (to <File>.corrupt-<time>,
	// next to it) and opens a new, empty one instead of failing.
	ResetCorrupt bool
	// OnReset, if set, hears of each file ResetCorrupt moved aside: where
	// it is now and why it was moved.
	OnReset func(movedTo string, cause error)
	// ResetHow names, in a *CorruptError's message, how the user asks for
	// ResetCorrupt (see CorruptError.ResetHow).
	ResetHow string
}

// Open opens the file of spec, creating it when it does not exist. Errors
// wrap ErrLocked, or are a *VersionError or a *CorruptError where that is
// the cause.
//
// A file that does not exist is a first start: it is created complete
// (written under a temporary name, then linked into place), so that a
// crash while creating it leaves no empty or half-made file behind. A
// file that exists is checked before it is used, under the lock that
// keeps a second process out: its page structure (checkPages), bbolt's
// own consistency check (Tx.Check), its buckets and layout stamp, and
// every record (Spec.Verify).
func Open(spec Spec) (*bolt.DB, error) {
	if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(spec.Dir, spec.File)
	db, release, err := open(spec, path)
	var ce *CorruptError
	if errors.As(err, &ce) {
		ce.ResetHow = spec.ResetHow
	}
	if !errors.As(err, &ce) || !spec.ResetCorrupt {
		release()
		return db, err
	}
	// Still holding the corrupt file's lock: no other process is using it.
	moved, merr := moveAside(path)
	release()
	if merr != nil {
		return nil, errors.Join(err, fmt.Errorf("move %s aside: %w", path, merr))
	}
	if spec.OnReset != nil {
		spec.OnReset(moved, ce)
	}
	db, release, err = open(spec, path)
	release()
	return db, err
}

// open opens path, creating it when missing. When it fails for a corrupt
// file it keeps that file locked until release is called.
func open(spec Spec, path string) (db *bolt.DB, release func(), err error) {
	release = func() {}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := create(spec, path); err != nil {
			return nil, release, fmt.Errorf("create %s: %w", path, err)
		}
	} else if err != nil {
		return nil, release, fmt.Errorf("state file: %w", err)
	}
	var held *os.File // the corrupt file, still locked
	opts := &bolt.Options{Timeout: spec.LockTimeout, OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag&^os.O_CREATE, perm) // bbolt would make an empty file a new one
		if err != nil {
			return nil, err
		}
		if err := lock(f, spec.LockTimeout); err != nil {
			f.Close()
			return nil, err
		}
		st, err := f.Stat()
		if err == nil {
			err = checkPages(f, st.Size())
			if err != nil {
				held = f
				return nil, &CorruptError{Path: path, Reason: err.Error()}
			}
			return f, nil
		}
		f.Close()
		return nil, err
	}}
	err = guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, opts)
		return err
	})
	if held != nil {
		release = func() { held.Close() }
	}
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		return nil, release, err
	case errors.Is(err, ErrLocked), errors.Is(err, berrors.ErrTimeout):
		return nil, release, fmt.Errorf("%w: %s", ErrLocked, path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, errPanicked):
		if opened := db; opened != nil {
			release = func() { opened.Close() }
		}
		return nil, release, &CorruptError{Path: path, Reason: "bbolt cannot read it", Err: err}
	case err != nil:
		return nil, release, fmt.Errorf("open %s: %w", path, err)
	}
	if err := guard(func() error { return check(db, spec, path) }); err != nil {
		if errors.Is(err, errPanicked) {
			err = &CorruptError{Path: path, Reason: "bbolt failed reading it", Err: err}
		}
		if opened := db; errors.As(err, &ce) {
			return nil, func() { opened.Close() }, err
		}
		return nil, release, errors.Join(err, db.Close())
	}
	return db, release, nil
}

// check runs the consistency checks of an open file and, for a file whose
// creation an older version left without buckets, creates them.
func check(db *bolt.DB, spec Spec, path string) error {
	corrupt := func(reason string, err error) error { return &CorruptError{Path: path, Reason: reason, Err: err} }
	empty := false
	err := db.View(func(tx *bolt.Tx) error {
		var problems []error
		for err := range tx.Check() {
			if len(problems) < 3 {
				problems = append(problems, err)
			}
		}
		if len(problems) > 0 {
			return corrupt("bbolt's consistency check fails", errors.Join(problems...))
		}
		first, _ := tx.Cursor().First()
		empty = first == nil
		if empty && tx.ID() > firstTxID {
			// Written to, and yet nothing in it: its buckets are gone.
			return corrupt("it holds no bucket, though it was written to", nil)
		}
		if empty {
			return nil
		}
		if spec.Layout != "" {
			meta := tx.Bucket(MetaBucket)
			if meta == nil {
				return corrupt(fmt.Sprintf("bucket %q is missing: it is not a pifleet state file, or it lost data", MetaBucket), nil)
			}
			switch v := meta.Get(LayoutKey); {
			case v == nil:
				return corrupt("its layout stamp is missing", nil)
			case string(v) != spec.Layout:
				return &VersionError{Path: path, Got: string(v), Want: spec.Layout}
			}
		}
		for _, b := range spec.Buckets {
			if tx.Bucket(b) == nil {
				return corrupt(fmt.Sprintf("bucket %q is missing", b), nil)
			}
		}
		if spec.Verify != nil {
			if err := spec.Verify(tx); err != nil {
				return corrupt("a record cannot be read", err)
			}
		}
		return nil
	})
	if err != nil || !empty {
		return err
	}
	// bbolt wrote the file but the first transaction never committed:
	// nothing was ever stored in it.
	return db.Update(func(tx *bolt.Tx) error { return initialize(tx, spec) })
}

// firstTxID is the transaction id of a file bbolt made and nobody wrote
// to: a file whose first transaction never committed.
const firstTxID = 1

// initialize stamps a new file and creates its buckets.
func initialize(tx *bolt.Tx, spec Spec) error {
	if spec.Layout != "" {
		meta, err := tx.CreateBucketIfNotExists(MetaBucket)
		if err != nil {
			return err
		}
		if err := meta.Put(LayoutKey, []byte(spec.Layout)); err != nil {
			return err
		}
	}
	for _, b := range spec.Buckets {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
}

// create writes a new, complete state file at path: under a temporary
// name first, then linked into place, which fails harmlessly when another
// process created it meanwhile.
func create(spec Spec, path string) error {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp := fmt.Sprintf("%s.new-%d-%s", path, os.Getpid(), hex.EncodeToString(rnd[:]))
	defer os.Remove(tmp)
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: spec.LockTimeout})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error { return initialize(tx, spec) })
	if err = errors.Join(err, db.Close()); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// moveAside renames the corrupt file at path to path.corrupt-<UTC time>
// (with a counter when that name is taken) and returns the new name.
func moveAside(path string) (string, error) {
	base := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405Z")
	moved := base
	for i := 2; ; i++ {
		err := os.Link(path, moved)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 100 {
			return "", err
		}
		moved = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Remove(path); err != nil {
		return "", err
	}
	return moved, syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// errPanicked marks an error made of a panic inside bbolt.
var errPanicked = errors.New("panic")

// guard runs fn on a goroutine of its own on which a fault reading the
// mapped file is a panic rather than a crash (debug.SetPanicOnFault), and
// turns a panic of fn into an error. checkPages makes sure bbolt is only
// given files whose pages hold together; this is the boundary that keeps
// a damage it does not know of from taking the process down. bbolt is
// left in an unknown state then: the caller only closes it.
func guard(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("%w inside bbolt: %v", errPanicked, r)
			}
		}()
		done <- fn()
	}()
	return <-done
}
