// Package boltfile opens the bbolt state files of pifleet's daemons (the
// agent's and the server's): one file in a 0700 directory, mode 0600,
// locked against a second process, stamped with a layout version so that a
// file written by another layout is refused untouched, and with its
// buckets created.
package boltfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	// stamped with it, an existing one must carry it.
	Layout string
	// Buckets are created when missing (MetaBucket always is).
	Buckets [][]byte
	// LockTimeout is how long to wait for another process to release the
	// file before failing with ErrLocked.
	LockTimeout time.Duration
}

// Open opens (creating if needed) the file of spec. Errors wrap ErrLocked
// or are a *VersionError where that is the cause.
func Open(spec Spec) (*bolt.DB, error) {
	if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(spec.Dir, spec.File)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: spec.LockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(MetaBucket)
		if err != nil {
			return err
		}
		switch v := meta.Get(LayoutKey); {
		case v == nil:
			if err := meta.Put(LayoutKey, []byte(spec.Layout)); err != nil {
				return err
			}
		case string(v) != spec.Layout:
			return &VersionError{Path: path, Got: string(v), Want: spec.Layout}
		}
		for _, b := range spec.Buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}
