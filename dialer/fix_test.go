package dialer

// Regression tests for the upstream bugs this package fixes (notes §1.13,
// checklist §1.15 third list). Each names the bug it guards against.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// §1.13 #9: upstream looked at its retry queue every 5 s.
func TestFix_LoopWakesAtNextDueTime(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		r.setScript(func(string, string) outcome { return outcome{err: errRefused, latency: 10 * time.Millisecond} })
		r.start()
		for range 5 {
			advance(10 * time.Millisecond) // the dial fails
			s := r.mustStatus("a", StateNeedsDial)
			advance(time.Until(s.NextDial))
			got := r.dials("a")
			if last := got[len(got)-1]; !last.at.Equal(s.NextDial) {
				t.Fatalf("dial %d at %v, due at %v", len(got), last.at, s.NextDial)
			}
		}
	})
}

// §1.13 #1: the same record could sit on the heap several times, and its
// next-dial time changed while it sat there. A random walk through every
// notification and result checks the heap after each step.
func TestFix_RecordOnHeapAtMostOnce(t *testing.T) {
	cfg := testConfig()
	cfg.PoolSize, cfg.QueueSize = 2, 2
	g := newEngineRig(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = fmt.Sprintf("t%02d", i)
		g.dir.add(ids[i], addrs(1+i%3)...)
	}
	var pending []*dialJob // started, result not yet delivered
	for step := range 20000 {
		id := ids[rng.IntN(len(ids))]
		switch op := rng.IntN(9); op {
		case 0:
			g.e.updated(g.now, id)
		case 1:
			g.dir.setConnected(id, false)
			g.e.disconnected(g.now, id)
		case 2:
			g.dir.setConnected(id, true)
			g.e.connected(g.now, id)
		case 3:
			if rng.IntN(4) == 0 {
				g.e.deleted(g.now, id)
			}
		case 4:
			g.e.scan(g.now)
		case 5, 6:
			if len(pending) > 0 {
				k := rng.IntN(len(pending))
				j := pending[k]
				pending = append(pending[:k], pending[k+1:]...)
				var err error
				if rng.IntN(2) == 0 {
					err = errRefused
				} else {
					g.dir.setConnected(j.id, true)
				}
				g.e.result(g.now, j, err)
			}
		default:
			g.advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		pending = append(pending, g.started...)
		g.started = g.started[:0]
		checkHeap(t, g.e)
		onHeap := 0
		for _, r := range g.e.records {
			switch {
			case r.state() == StateDialing, r.waiting:
				if r.heapIndex >= 0 {
					t.Fatalf("step %d: %s is %s (waiting %v) but on the heap", step, r.id, r.state(), r.waiting)
				}
			default:
				if r.heapIndex < 0 {
					t.Fatalf("step %d: %s is %s but not on the heap", step, r.id, r.state())
				}
				onHeap++
			}
		}
		if onHeap != len(g.e.due) {
			t.Fatalf("step %d: %d records due but %d heap entries", step, onHeap, len(g.e.due))
		}
		if g.e.running > cfg.PoolSize || g.e.queued > cfg.QueueSize {
			t.Fatalf("step %d: %d running, %d queued", step, g.e.running, g.e.queued)
		}
	}
}

// §1.13 #7: deletion left the record on the heap.
func TestFix_DeleteRemovesHeapEntry(t *testing.T) {
	cfg := testConfig()
	cfg.MinRetryInterval = time.Minute
	g := newEngineRig(t, cfg)
	g.dir.add("a", "10.0.0.1:9788")
	g.dialNow("a")
	g.finish("a", errRefused)
	if len(g.e.due) != 1 {
		t.Fatalf("heap holds %d entries, want 1", len(g.e.due))
	}
	g.e.deleted(g.now, "a")
	if len(g.e.due) != 0 || len(g.e.records) != 0 {
		t.Fatalf("after delete: %d heap entries, %d records", len(g.e.due), len(g.e.records))
	}
	g.e.updated(g.now, "a") // re-created
	g.advance(time.Minute)
	if n := len(g.started); n != 2 {
		t.Errorf("%d dials, want 2 (the orphan must not dial)", n)
	}
	checkHeap(t, g.e)
}

// §1.13 #7: after delete + re-create, the old and the new record could
// dial the same id at once.
func TestFix_DeleteAndRecreateNeverDialsTwice(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		// The first dial is stuck in a connect that ignores cancellation.
		n := 0
		r.setScript(func(string, string) outcome {
			if n++; n == 1 {
				return outcome{latency: 3 * time.Second, ignoreCancel: true, err: errRefused}
			}
			return outcome{}
		})
		t0 := time.Now()
		r.start()
		advance(500 * time.Millisecond)
		r.dir.remove("a")
		r.d.Deleted("a")
		r.dir.add("a", "10.0.0.1:9788")
		r.d.Updated("a")
		advance(time.Second)
		if s := r.mustStatus("a", StateNeedsDial); !s.NextDial.IsZero() {
			t.Errorf("the new record is scheduled (%v) while the old dial runs", s.NextDial)
		}
		advance(1500 * time.Millisecond)
		got := r.dials("a")
		if len(got) != 2 || got[1].at != t0.Add(3*time.Second) {
			t.Fatalf("dials %+v: want the second when the first returned (+3s)", got)
		}
		r.mustStatus("a", StateConnected) // the old failure did not touch it
	})
}

// §1.13 #2: upstream reported every loss of a dialled connection twice; the
// second report took the "not Connected" path and reset the backoff.
func TestFix_DuplicateDisconnectKeepsFastFailureBackoff(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788", "10.0.0.2:9788")
		r.start()
		var s TargetStatus
		for range 4 { // four fast failures build up a backoff
			r.mustStatus("a", StateConnected)
			advance(time.Second)
			r.dir.setConnected("a", false)
			r.d.Disconnected("a")
			synctest.Wait()
			s = r.mustStatus("a", StateNeedsDial)
			advance(s.RetryDelay)
		}
		advance(time.Second)
		r.dir.setConnected("a", false)
		r.d.Disconnected("a")
		synctest.Wait()
		before := r.mustStatus("a", StateNeedsDial)
		advance(time.Millisecond)
		r.d.Disconnected("a") // the duplicate
		r.d.Disconnected("a")
		synctest.Wait()
		if d := cmp.Diff(before, r.mustStatus("a", StateNeedsDial)); d != "" {
			t.Errorf("a duplicate disconnect changed the record (-before +after):\n%s", d)
		}
		if before.Attempts != 5 {
			t.Errorf("attempts %d, want 5", before.Attempts)
		}
	})
}

// §1.13 #3: upstream's own successful dial raised a "connected" event that
// zeroed the backoff kept for fast-failure detection. Both orders of the
// dial's result and the report are covered.
func TestFix_ConnectedAfterOwnDialKeepsFastFailureAccounting(t *testing.T) {
	for _, reportFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("reportBeforeResult=%v", reportFirst), func(t *testing.T) {
			inBubble(t, func(t *testing.T) {
				cfg := testConfig()
				r := newRig(t, cfg)
				r.dir.add("a", "10.0.0.1:9788")
				release := make(chan struct{})
				n := 0
				r.setScript(func(string, string) outcome {
					if n++; n <= 2 {
						return outcome{err: errRefused}
					}
					return outcome{release: release}
				})
				r.start()
				advance(r.mustStatus("a", StateNeedsDial).RetryDelay)
				advance(r.mustStatus("a", StateNeedsDial).RetryDelay) // third dial hangs
				r.mustStatus("a", StateDialing)
				want := r.mustStatus("a", StateDialing)

				if reportFirst {
					r.dir.setConnected("a", true)
					r.d.Connected("a") // our own connection, reported early
					synctest.Wait()
					close(release)
				} else {
					close(release)
					synctest.Wait()
					r.d.Connected("a") // reported after the result
				}
				synctest.Wait()
				got := r.mustStatus("a", StateConnected)
				if got.Attempts != want.Attempts || got.RetryDelay != want.RetryDelay || want.Attempts != 2 {
					t.Fatalf("after our own dial: attempts %d delay %v, want %d and %v kept", got.Attempts, got.RetryDelay, want.Attempts, want.RetryDelay)
				}

				advance(time.Second) // then a fast failure continues from there
				r.dir.setConnected("a", false)
				r.d.Disconnected("a")
				synctest.Wait()
				if s := r.mustStatus("a", StateNeedsDial); s.Attempts != 3 || s.RetryDelay < want.RetryDelay {
					t.Errorf("after the fast failure: attempts %d delay %v, want 3 and ≥ %v", s.Attempts, s.RetryDelay, want.RetryDelay)
				}
			})
		})
	}
}

// §1.13 #10: a failing dial result after the target dialled in moved the
// record from Connected back to NeedsDial.
func TestFix_DialErrorAfterExternalConnectIgnored(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		cfg := testConfig()
		r := newRig(t, cfg)
		r.dir.add("a", "10.0.0.1:9788")
		release := make(chan struct{})
		r.setScript(func(string, string) outcome { return outcome{release: release, err: errRefused} })
		r.start()
		r.mustStatus("a", StateDialing)

		r.dir.setConnected("a", true) // the agent dials in
		r.d.Connected("a")
		synctest.Wait()
		close(release) // our dial fails
		synctest.Wait()
		s := r.mustStatus("a", StateConnected)
		if s.Attempts != 0 || s.RetryDelay != 0 {
			t.Errorf("after the external connection: %+v, want no backoff", s)
		}
		advance(cfg.FastFailureWindow)
		r.mustUntracked("a")
		if n := len(r.dials("a")); n != 1 {
			t.Errorf("%d dials, want 1", n)
		}
	})
}

// §1.13 #5: the worker read the address from the shared record while the
// loop replaced it. Run with -race.
func TestFix_DialGetsAddressByValue(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		release := make(chan struct{})
		var mu sync.Mutex
		var seen []string
		r.d.dial = func(_ context.Context, _, addr string) error {
			mu.Lock()
			seen = append(seen, addr)
			mu.Unlock()
			<-release
			mu.Lock()
			seen = append(seen, addr) // read again after the updates
			mu.Unlock()
			return errRefused
		}
		r.start()
		for i := range 20 {
			r.dir.set("a", func(e *memEntry) { e.addrs = []string{fmt.Sprintf("10.0.1.%d:9788", i)} })
			r.d.Updated("a")
			synctest.Wait()
		}
		if s := r.mustStatus("a", StateDialing); s.Addresses[0] != "10.0.1.19:9788" {
			t.Fatalf("addresses %v, want the last update", s.Addresses)
		}
		close(release)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if seen[0] != "10.0.0.1:9788" || seen[1] != "10.0.0.1:9788" {
			t.Errorf("the dial saw %v, want the address of its dispatch throughout", seen)
		}
	})
}

// §1.13 #8: producers blocked while the loop waited out DialDelay, and
// whenever its 64-slot channel was full.
func TestFix_CallersNeverBlocked(t *testing.T) {
	t.Run("during DialDelay", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			r := newRig(t, DefaultConfig())
			r.start()
			t0 := time.Now()
			for i := range 10000 {
				id := fmt.Sprintf("t%d", i)
				r.d.Updated(id)
				r.d.Disconnected(id)
				r.d.Connected(id)
				r.d.Deleted(id)
				_ = r.d.Stats()
			}
			if waited := time.Since(t0); waited != 0 {
				t.Errorf("40,000 notifications took %v of virtual time", waited)
			}
		})
	})
	t.Run("while the loop is busy", func(t *testing.T) {
		inBubble(t, func(t *testing.T) {
			r := newRig(t, testConfig())
			stuck := &stuckDirectory{memDirectory: r.dir, gate: make(chan struct{})}
			r.d.dir = stuck
			r.start()
			stuck.block.Store(true)
			r.dir.add("a", "10.0.0.1:9788")
			r.d.Updated("a") // the loop blocks inside the directory
			synctest.Wait()
			if !stuck.inside.Load() {
				t.Fatal("the loop is not inside the directory")
			}
			t0 := time.Now()
			for i := range 10000 {
				r.d.Disconnected(fmt.Sprintf("t%d", i))
			}
			if waited := time.Since(t0); waited != 0 {
				t.Errorf("notifications to a busy loop took %v", waited)
			}
			stuck.block.Store(false)
			close(stuck.gate)
			synctest.Wait()
			r.mustStatus("a", StateConnected)
		})
	})
}

// stuckDirectory makes the loop hang inside Addresses while block is set.
type stuckDirectory struct {
	*memDirectory
	gate   chan struct{}
	block  atomic.Bool
	inside atomic.Bool
}

func (s *stuckDirectory) Addresses(id string) []string {
	if s.block.Load() {
		s.inside.Store(true)
		<-s.gate
	}
	return s.memDirectory.Addresses(id)
}

// The same, when the target's own connection is gone again by the time our
// dial fails: a plain failure, not a connection to watch.
func TestFix_DialErrorAfterExternalConnectAndLossIsAFailure(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		r := newRig(t, testConfig())
		r.dir.add("a", "10.0.0.1:9788")
		release := make(chan struct{})
		r.setScript(func(string, string) outcome { return outcome{release: release, err: errRefused} })
		r.start()
		r.dir.setConnected("a", true)
		r.d.Connected("a")
		synctest.Wait()
		r.dir.setConnected("a", false)
		r.d.Disconnected("a") // stale while Dialing
		synctest.Wait()
		close(release)
		synctest.Wait()
		if s := r.mustStatus("a", StateNeedsDial); s.Attempts != 1 || s.LastError != errRefused.Error() {
			t.Errorf("after the dial failed with no connection left: %+v", s)
		}
	})
}
