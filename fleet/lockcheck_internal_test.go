package fleet

import (
	"testing"
	"time"

	"example.com/pifleet/fleet/internal/serverstore"
)

// Every test of the package runs with the lock check on: a wait for the
// state file while holding the fleet lock panics (lockcheck.go).
func init() { lockCheck.Store(true) }

// SetLockCheck turns the lock check off for a benchmark (it reads the
// stack at every Lock) and returns the previous setting.
func SetLockCheck(on bool) (was bool) { return lockCheck.Swap(on) }

// SetLockTiming turns the keeping of the fleet lock's hold times on or
// off (for a benchmark).
func SetLockTiming(on bool) { lockTiming.Store(on) }

// LockHolds returns how long each hold of the fleet lock lasted since the
// last call (with SetLockTiming on).
func (f *Fleet) LockHolds() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.mu.holds
	f.mu.holds = nil
	return h
}

// HoldWrites stops the state store's writer until release is called (or
// the test ends): what is queued meanwhile waits.
func (f *Fleet) HoldWrites(t testing.TB) (release func()) {
	release = f.store.Hold()
	t.Cleanup(release)
	return release
}

// PersistQueued returns a channel that receives "task <id>" or
// "instance <id>" for every record write of f queued from now on, until
// the test ends (the channel holds 64; more are dropped).
func (f *Fleet) PersistQueued(t testing.TB) <-chan string {
	c := make(chan string, 64)
	h := func(g *Fleet, what, id string) {
		if g == f {
			select {
			case c <- what + " " + id:
			default:
			}
		}
	}
	if !testHookPersist.CompareAndSwap(nil, &h) {
		t.Fatal("PersistQueued: another test listens")
	}
	t.Cleanup(func() { testHookPersist.Store(nil) })
	return c
}

func TestWaitingForTheDiskUnderTheFleetLockPanics(t *testing.T) {
	f, err := New(WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func() error {
		return f.store.Update(func(tx *serverstore.Tx) error { return tx.PutProjection("m", []byte(`{}`)) })
	}
	if err := write(); err != nil { // without the lock: fine
		t.Fatal(err)
	}
	panicked := func() (p any) {
		defer func() { p = recover() }()
		f.mu.Lock()
		defer f.mu.Unlock()
		_ = write()
		return nil
	}()
	if panicked == nil {
		t.Fatal("a write waited for under the fleet lock did not panic")
	}
	// Another goroutine holding the lock is no fault of this one.
	f.mu.Lock()
	done := make(chan error)
	go func() { done <- write() }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.mu.Unlock()
}

// A reader of the instance and task core that waited for the disk would
// hold up every change of the fleet: it panics too.
func TestWaitingForTheDiskUnderTheCoreLockPanics(t *testing.T) {
	f, err := New(WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	panicked := func() (p any) {
		defer func() { p = recover() }()
		f.core.mu.RLock()
		defer f.core.mu.RUnlock()
		_ = f.store.Update(func(tx *serverstore.Tx) error { return tx.PutProjection("m", []byte(`{}`)) })
		return nil
	}()
	if panicked == nil {
		t.Fatal("a write waited for under the core's read lock did not panic")
	}
	// The fleet lock taken without the core's (lockAgents) is checked too.
	panicked = func() (p any) {
		defer func() { p = recover() }()
		f.mu.lockAgents()
		defer f.mu.Unlock()
		_ = f.store.Update(func(tx *serverstore.Tx) error { return tx.PutProjection("m", []byte(`{}`)) })
		return nil
	}()
	if panicked == nil {
		t.Fatal("a write waited for under the fleet lock alone did not panic")
	}
}

// whileLockHeld runs fn while this goroutine holds the fleet lock, taken
// by lock (f.mu.Lock, or f.mu.lockAgents for the part of it a connection's
// change takes), and fails the test (what names fn's work) if fn does not
// return within a minute: what fn does must not wait for that lock.
func whileLockHeld(t *testing.T, f *Fleet, lock func(), what string, fn func() error) {
	t.Helper()
	lock()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		f.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		f.mu.Unlock()
		t.Fatalf("%s waited for the fleet lock", what)
	}
}
