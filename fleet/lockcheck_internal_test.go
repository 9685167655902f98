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
