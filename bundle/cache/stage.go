package cache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// stagePrefix starts the names of everything a sync writes before it is
// complete: a lock file .sync-N.lock, held while the sync runs, the
// staging directory .sync-N and a pointer being written, .sync-N.pointer.
// The TypeScript implementation names its staging directories the same
// way (without lock files).
const stagePrefix = ".sync-"

// unlockedStaleAfter is how old a staging entry without a lock file (the
// TypeScript implementation's, or one on a platform without file locks)
// must be before it is considered abandoned.
const unlockedStaleAfter = time.Hour

// stage is the scratch space of one sync, owned through its lock.
type stage struct {
	root string
	id   string
	lock *os.File
}

// newStage creates and locks a new stage.
func (c *Cache) newStage() (*stage, error) {
	for {
		f, err := os.CreateTemp(c.root, stagePrefix+"*.lock")
		if err != nil {
			return nil, err
		}
		locked, err := tryLock(f)
		if err == nil && locked && stillAt(f) {
			id := strings.TrimSuffix(filepath.Base(f.Name()), ".lock")
			return &stage{root: c.root, id: id, lock: f}, nil
		}
		// A cleaner took the brand-new file for an abandoned one: try a
		// new name.
		f.Close()
		if err != nil {
			return nil, err
		}
	}
}

// stillAt reports whether f is still the file at its path (a cleaner that
// won the lock removes it).
func stillAt(f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(f.Name())
	return err == nil && os.SameFile(a, b)
}

func (s *stage) dir() string         { return filepath.Join(s.root, s.id) }
func (s *stage) pointerTemp() string { return filepath.Join(s.root, s.id+".pointer") }

// release removes whatever the stage still holds, then its lock.
func (s *stage) release() error {
	err := errors.Join(removeAll(s.dir()), removeFile(s.pointerTemp()), removeFile(s.lock.Name()))
	return errors.Join(err, s.lock.Close())
}

// CleanStaging removes what interrupted syncs left behind: staging
// directories and half-written pointers whose sync no longer holds its
// lock (the process died), and those of syncs without a lock file that are
// older than an hour. Sync calls it first; an agent may call it at start.
// It returns how many stages it removed.
func (c *Cache) CleanStaging() (int, error) {
	entries, err := os.ReadDir(c.root)
	if err != nil {
		return 0, err
	}
	ids := map[string]bool{}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, stagePrefix) {
			name = strings.TrimSuffix(strings.TrimSuffix(name, ".lock"), ".pointer")
			ids[name] = true
		}
	}
	removed := 0
	var errs []error
	for id := range ids {
		stale, err := c.abandoned(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if stale {
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// abandoned removes stage id when no live sync owns it, reporting whether
// it did.
func (c *Cache) abandoned(id string) (bool, error) {
	base := filepath.Join(c.root, id)
	lockPath := base + ".lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if !olderThan(base, unlockedStaleAfter) || !olderThan(base+".pointer", unlockedStaleAfter) {
			return false, nil
		}
		return true, errors.Join(removeAll(base), removeFile(base+".pointer"))
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if !lockSupported {
		if !olderThan(lockPath, unlockedStaleAfter) {
			return false, nil
		}
	} else if locked, err := tryLock(f); err != nil || !locked {
		return false, err
	}
	// The lock is ours: its owner is gone. Remove the lock file last, while
	// still holding it, so that a sync that has just created it notices.
	return true, errors.Join(removeAll(base), removeFile(base+".pointer"), removeFile(lockPath))
}

// olderThan reports whether path is missing or was modified more than d
// ago.
func olderThan(path string, d time.Duration) bool {
	fi, err := os.Lstat(path)
	return err != nil || time.Since(fi.ModTime()) > d
}

func removeAll(path string) error {
	if err := os.RemoveAll(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
