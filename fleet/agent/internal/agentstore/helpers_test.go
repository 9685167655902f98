package agentstore

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/transport"
)

// fakeClock is an injected wall clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_750_000_000_000).UTC()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// steps is a deterministic RetryPolicy: the n-th delay is steps[n], the
// last one repeating.
type steps []time.Duration

func (s steps) ForAttempt(a float64) time.Duration { return s[min(int(a), len(s)-1)] }

// openAt opens a store in dir with the clock and policy.
func openAt(t testing.TB, dir string, c *fakeClock, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, append([]Option{WithClock(c.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// open opens a store in a fresh directory, closed at the end of the test.
func open(t testing.TB, c *fakeClock, opts ...Option) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := openAt(t, dir, c, opts...)
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// done builds a task_done frame.
func done(instanceID, taskID string) *transport.TaskDoneFrame {
	cost := 0.25
	return &transport.TaskDoneFrame{
		InstanceID: instanceID,
		TaskID:     taskID,
		Status:     transport.TaskSettled,
		Summary:    "did " + taskID,
		Stats:      &transport.TaskStats{Cost: &cost},
	}
}

// mustPut stores a task_done and returns its entry.
func mustPut(t testing.TB, s *Store, instanceID, taskID string) Entry {
	t.Helper()
	e, err := s.Put(done(instanceID, taskID), "")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// seqs returns the seqs of entries, in order.
func seqs(es []Entry) []Seq {
	out := make([]Seq, 0, len(es))
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// lastSeq reads the stored last seq.
func lastSeq(t testing.TB, s *Store) Seq {
	t.Helper()
	var q Seq
	if err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyLastSeq); len(v) == 8 {
			q = Seq(binary.BigEndian.Uint64(v))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return q
}

func pending(t testing.TB, s *Store) []Entry {
	t.Helper()
	es, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return es
}
