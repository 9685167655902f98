package identity

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingWhois answers for 100.87.12.34 once release is closed, counting
// its lookups; anything else is an unknown peer.
type countingWhois struct {
	calls   atomic.Int32
	entered chan struct{} // receives a value as each lookup starts, when set
	release chan struct{}
	err     error // returned instead of the identity when set
	ctxErr  atomic.Value
}

var buildbox = Identity{Machine: "buildbox", User: "ana@github"}

func (w *countingWhois) Whois(ctx context.Context, addr netip.Addr) (Identity, error) {
	w.calls.Add(1)
	if w.entered != nil {
		w.entered <- struct{}{}
	}
	if w.release != nil {
		<-w.release
	}
	if err := ctx.Err(); err != nil {
		w.ctxErr.Store(err)
	}
	if w.err != nil {
		return Identity{}, w.err
	}
	if addr != netip.MustParseAddr("100.87.12.34") {
		return Identity{}, ErrUnknownPeer
	}
	return buildbox, nil
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var peer = netip.MustParseAddr("100.87.12.34")

func TestCacheSharesOneLookupAndKeepsItForItsLifetime(t *testing.T) {
	w := &countingWhois{entered: make(chan struct{}, 64), release: make(chan struct{})}
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	c := NewCache(w, WithCacheClock(clock.now))
	var wg sync.WaitGroup
	for i := range 50 {
		addr := peer
		if i%2 == 1 {
			addr = netip.MustParseAddr("::ffff:100.87.12.34") // the same peer
		}
		wg.Go(func() {
			if id, err := c.Whois(t.Context(), addr); err != nil || id != buildbox {
				t.Errorf("Whois = %+v, %v", id, err)
			}
		})
	}
	<-w.entered
	close(w.release)
	wg.Wait()
	if n := w.calls.Load(); n != 1 {
		t.Fatalf("50 concurrent questions ran %d lookups, want 1", n)
	}
	clock.advance(DefaultAnswerTTL - time.Second)
	c.Whois(t.Context(), peer)
	if n := w.calls.Load(); n != 1 {
		t.Fatalf("within the lifetime: %d lookups, want 1", n)
	}
	clock.advance(time.Second)
	if id, err := c.Whois(t.Context(), peer); err != nil || id != buildbox {
		t.Fatalf("after the lifetime: %+v, %v", id, err)
	}
	if n := w.calls.Load(); n != 2 {
		t.Fatalf("after the lifetime: %d lookups, want 2", n)
	}
	c.Forget(peer)
	c.Whois(t.Context(), peer)
	c.Flush()
	c.Whois(t.Context(), peer)
	if n := w.calls.Load(); n != 4 {
		t.Fatalf("after Forget and Flush: %d lookups, want 4", n)
	}
}

func TestCacheKeepsRefusalsBrieflyAndTimeoutsNot(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	w := &countingWhois{}
	c := NewCache(w, WithCacheClock(clock.now))
	stranger := netip.MustParseAddr("100.64.0.7")
	for range 3 {
		if _, err := c.Whois(t.Context(), stranger); !errors.Is(err, ErrUnknownPeer) {
			t.Fatalf("stranger: %v", err)
		}
	}
	if n := w.calls.Load(); n != 1 {
		t.Fatalf("a refusal was looked up %d times, want 1", n)
	}
	clock.advance(DefaultRefusalTTL)
	c.Whois(t.Context(), stranger)
	if n := w.calls.Load(); n != 2 {
		t.Fatalf("after the refusal lifetime: %d lookups, want 2", n)
	}

	w = &countingWhois{err: &CommandError{Args: []string{"whois"}, Err: context.DeadlineExceeded}}
	c = NewCache(w, WithCacheClock(clock.now))
	for range 2 {
		if _, err := c.Whois(t.Context(), peer); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("timed-out lookup: %v", err)
		}
	}
	if n := w.calls.Load(); n != 2 {
		t.Fatalf("a timed-out lookup was reused: %d lookups, want 2", n)
	}
}

// A caller that gives up gets its context's error at once; the lookup goes
// on, under a context of its own, for the others.
func TestCacheCallerCancellationLeavesTheLookup(t *testing.T) {
	w := &countingWhois{entered: make(chan struct{}, 64), release: make(chan struct{})}
	c := NewCache(w)
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() {
		_, err := c.Whois(ctx, peer)
		gone <- err
	}()
	<-w.entered
	waiting := make(chan Identity, 1)
	go func() {
		id, _ := c.Whois(t.Context(), peer)
		waiting <- id
	}()
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled caller got %v", err)
	}
	close(w.release)
	if id := <-waiting; id != buildbox {
		t.Fatalf("the other caller got %+v", id)
	}
	if err := w.ctxErr.Load(); err != nil {
		t.Fatalf("the lookup's context ended with its first caller: %v", err)
	}
	if n := w.calls.Load(); n != 1 {
		t.Fatalf("%d lookups, want 1", n)
	}
}
