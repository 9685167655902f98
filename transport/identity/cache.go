package identity

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"time"
)

// Default lifetimes of a Cache's answers.
const (
	// DefaultAnswerTTL is how long an identity is reused: a machine
	// removed from the tailnet keeps what the cache's user grants it for
	// at most this long.
	DefaultAnswerTTL = 30 * time.Second
	// DefaultRefusalTTL is how long a refusal (unknown peer, tailscale
	// failing) is reused, so that an unknown peer's requests do not each
	// start a lookup. A lookup that timed out is not reused.
	DefaultRefusalTTL = 5 * time.Second
	// lookupLimit bounds one lookup, which runs apart from the callers'
	// contexts (several may wait for it).
	lookupLimit = 30 * time.Second
	// maxCached bounds the addresses kept; past it, expired ones go.
	maxCached = 4096
)

// Cache is a Whois that looks each address up once and reuses the answer
// for a short time: for a caller that asks for every request it serves
// (the bundle registry's gate asks for every file of a sync), where a
// lookup is a tailscale process. Concurrent questions about one address
// share one lookup, and a caller that gives up does not end it for the
// others. Answers are reused for the answer lifetime, refusals for the
// refusal lifetime; Forget and Flush drop them earlier (when the tailnet
// is known to have changed). It is safe for concurrent use.
type Cache struct {
	whois      Whois
	answerTTL  time.Duration
	refusalTTL time.Duration
	now        func() time.Time

	mu      sync.Mutex
	entries map[netip.Addr]*cacheEntry
	lookups int
}

type cacheEntry struct {
	done    chan struct{} // closed when the lookup ended
	id      Identity      // set before done is closed
	err     error
	expires time.Time // guarded by Cache.mu; zero while the lookup runs
}

// CacheOption configures NewCache.
type CacheOption func(*Cache)

// WithLifetimes sets how long answers and refusals are reused (defaults
// DefaultAnswerTTL and DefaultRefusalTTL); zero means not at all.
func WithLifetimes(answer, refusal time.Duration) CacheOption {
	return func(c *Cache) { c.answerTTL, c.refusalTTL = max(answer, 0), max(refusal, 0) }
}

// WithCacheClock sets the clock the lifetimes are measured with (tests).
func WithCacheClock(now func() time.Time) CacheOption { return func(c *Cache) { c.now = now } }

// NewCache returns a Cache in front of w.
func NewCache(w Whois, opts ...CacheOption) *Cache {
	c := &Cache{whois: w, answerTTL: DefaultAnswerTTL, refusalTTL: DefaultRefusalTTL, now: time.Now,
		entries: map[netip.Addr]*cacheEntry{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Whois returns the identity behind addr: the one found by a lookup that
// is still fresh, else that of a lookup under way, else that of a new one.
func (c *Cache) Whois(ctx context.Context, addr netip.Addr) (Identity, error) {
	addr, err := normalize(addr)
	if err != nil {
		return Identity{}, err
	}
	c.mu.Lock()
	e := c.entries[addr]
	if e != nil && !e.expires.IsZero() && !c.now().Before(e.expires) {
		e = nil // stale
	}
	if e == nil {
		e = &cacheEntry{done: make(chan struct{})}
		c.entries[addr] = e
		c.lookups++
		c.sweep()
		go c.lookup(context.WithoutCancel(ctx), addr, e)
	}
	c.mu.Unlock()
	select {
	case <-e.done:
		return e.id, e.err
	case <-ctx.Done():
		return Identity{}, ctx.Err()
	}
}

// lookup asks the wrapped Whois for addr and records the answer in e.
func (c *Cache) lookup(ctx context.Context, addr netip.Addr, e *cacheEntry) {
	ctx, cancel := context.WithTimeout(ctx, lookupLimit)
	id, err := c.whois.Whois(ctx, addr)
	cancel()
	ttl := c.answerTTL
	if err != nil {
		ttl = c.refusalTTL
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			ttl = 0 // says nothing about the peer
		}
	}
	e.id, e.err = id, err
	c.mu.Lock()
	e.expires = c.now().Add(ttl)
	if ttl == 0 && c.entries[addr] == e {
		delete(c.entries, addr)
	}
	c.mu.Unlock()
	close(e.done)
}

// sweep drops expired answers once more than maxCached addresses are
// kept. c.mu is held.
func (c *Cache) sweep() {
	if len(c.entries) <= maxCached {
		return
	}
	now := c.now()
	for a, e := range c.entries {
		if !e.expires.IsZero() && !now.Before(e.expires) {
			delete(c.entries, a)
		}
	}
}

// Forget drops what is known about addr: the next question looks it up.
func (c *Cache) Forget(addr netip.Addr) {
	addr, err := normalize(addr)
	if err != nil {
		return
	}
	c.mu.Lock()
	delete(c.entries, addr)
	c.mu.Unlock()
}

// Flush drops every answer (the tailnet changed).
func (c *Cache) Flush() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}

// Lookups is how many lookups the cache started so far.
func (c *Cache) Lookups() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookups
}
