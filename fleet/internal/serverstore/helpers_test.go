package serverstore

import (
	"sync"
	"testing"
	"time"
)

// clock is a settable clock for WithClock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 7, 15, 9, 0, 0, 0, time.UTC)}
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openT opens a store in dir and closes it when the test ends.
func openT(t *testing.T, dir string, opts ...Option) *Store {
	t.Helper()
	st, err := Open(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// report returns a task_done of instance i-1 for task with seq.
func report(task string, seq float64) TaskDone {
	return TaskDone{TaskID: task, InstanceID: "i-1", Seq: seq, Status: "settled", Summary: "done " + task}
}
