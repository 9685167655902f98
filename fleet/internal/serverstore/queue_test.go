package serverstore

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"weak"
)

// blockWriter queues a change that holds the committing goroutine until
// the returned function is called, so that what is queued next gathers.
func blockWriter(t *testing.T, st *Store) (release func()) {
	t.Helper()
	release = st.Hold()
	t.Cleanup(release)
	return release
}

func TestQueuedChangesShareOneTransaction(t *testing.T) {
	st := openT(t, t.TempDir())
	release := blockWriter(t, st)
	const n = 100
	var mu sync.Mutex
	txs := map[int]bool{}
	var ps []*Pending
	for i := range n {
		ps = append(ps, st.Queue(func(tx *Tx) error {
			mu.Lock()
			txs[tx.tx.ID()] = true
			mu.Unlock()
			_, err := tx.PutTask(Task{TaskID: fmt.Sprintf("t-%03d", i), InstanceID: "i-1", State: "running"})
			return err
		}, nil))
	}
	release()
	for _, p := range ps {
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if len(txs) != 1 {
		t.Errorf("%d changes queued together committed in %d transactions, want 1", n, len(txs))
	}
	tasks, err := st.ListTasks()
	if err != nil || len(tasks) != n {
		t.Fatalf("%d tasks stored (%v), want %d", len(tasks), err, n)
	}
}

func TestQueuedChangesLandInTheOrderQueued(t *testing.T) {
	st := openT(t, t.TempDir())
	release := blockWriter(t, st)
	// Queued from one goroutine after the other (as a lock orders them),
	// waited for in the reverse order: the last one queued is stored.
	var ps []*Pending
	for i := range 50 {
		rec := Task{TaskID: "t-1", InstanceID: "i-1", State: "running", Rejects: i}
		ps = append(ps, st.Queue(func(tx *Tx) error { _, err := tx.PutTask(rec); return err }, nil))
	}
	release()
	for i := len(ps) - 1; i >= 0; i-- {
		if err := ps[i].Wait(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.GetTask("t-1")
	if err != nil || got.Rejects != 49 {
		t.Fatalf("stored rejects %d (%v), want the last queued, 49", got.Rejects, err)
	}
}

func TestAFailingChangeFailsAloneAndTheOthersCommit(t *testing.T) {
	st := openT(t, t.TempDir())
	release := blockWriter(t, st)
	put := func(id string) *Pending {
		return st.Queue(func(tx *Tx) error {
			_, err := tx.PutTask(Task{TaskID: id, InstanceID: "i-1", State: "running"})
			return err
		}, nil)
	}
	boom := errors.New("boom")
	var heard []error
	var mu sync.Mutex
	a := put("t-a")
	bad := st.Queue(func(tx *Tx) error {
		if _, err := tx.PutTask(Task{TaskID: "t-bad", InstanceID: "i-1", State: "running"}); err != nil {
			return err
		}
		return boom
	}, func(err error) { mu.Lock(); heard = append(heard, err); mu.Unlock() })
	b := put("t-b")
	release()
	if err := a.Wait(); err != nil {
		t.Errorf("change before the failing one: %v", err)
	}
	if err := bad.Wait(); !errors.Is(err, boom) {
		t.Errorf("failing change: %v, want its own error", err)
	}
	if err := b.Wait(); err != nil {
		t.Errorf("change after the failing one: %v", err)
	}
	mu.Lock()
	if len(heard) != 1 || !errors.Is(heard[0], boom) {
		t.Errorf("then heard %v, want the change's error once", heard)
	}
	mu.Unlock()
	for id, want := range map[string]bool{"t-a": true, "t-bad": false, "t-b": true} {
		_, err := st.GetTask(id)
		if got := err == nil; got != want {
			t.Errorf("%s stored %v, want %v (%v)", id, got, want, err)
		}
	}
}

func TestCloseCommitsWhatIsQueuedAndRefusesLaterChanges(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	release := blockWriter(t, st)
	p := st.Queue(func(tx *Tx) error {
		_, err := tx.PutTask(Task{TaskID: "t-1", InstanceID: "i-1", State: "running"})
		return err
	}, nil)
	closed := make(chan error)
	go func() { closed <- st.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Errorf("change queued before Close: %v", err)
	}
	if err := st.Queue(func(*Tx) error { return nil }, nil).Wait(); !errors.Is(err, ErrClosed) {
		t.Errorf("change after Close: %v, want ErrClosed", err)
	}
	st = openT(t, dir)
	if _, err := st.GetTask("t-1"); err != nil {
		t.Errorf("change queued before Close not on disk: %v", err)
	}
}

// A finished change lets go of what its functions hold: the fleet keeps
// every instance's last write, and 100,000 of them held a copy of each
// record written.
func TestAFinishedChangeHoldsNoCopyOfItsRecord(t *testing.T) {
	st := openT(t, t.TempDir())
	queue := func() (*Pending, weak.Pointer[Task]) {
		rec := &Task{TaskID: "t1"}
		return st.Queue(func(*Tx) error { _ = rec.TaskID; return nil },
			func(error) { _ = rec.TaskID }), weak.Make(rec)
	}
	p, held := queue()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if held.Value() != nil {
		t.Error("a finished Pending still holds what its functions captured")
	}
	runtime.KeepAlive(p)
}
