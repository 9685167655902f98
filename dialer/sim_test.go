package dialer

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The simulation runs a real Dialer over 10,000 targets for hours of
// virtual time, under a scripted fault model, and checks the invariants the
// dialer promises while it runs and when it ends.

type simKind uint8

const (
	simStable      simKind = iota // connects; caught in the network blip
	simUnreachable                // every dial times out after 1–3 s (other failures are refusals, 10–100 ms)
	simFlapping                   // drops 0.2–4 s after connecting until flapUntil
	simFlapEcho                   // flapping, and reports our own connection through Connected
	simChurn                      // deleted and re-created a few times
	simMultiAddr                  // three addresses, one works
	simInbound                    // unreachable until it dials in by itself
)

func simKindOf(i int) simKind {
	switch i % 20 {
	case 0:
		return simUnreachable
	case 1:
		return simFlapping
	case 2:
		return simFlapEcho
	case 3:
		return simChurn
	case 4, 5:
		return simMultiAddr
	case 6:
		return simInbound
	}
	return simStable
}

const (
	simFlapUntil = time.Hour
	simFaultsEnd = 2 * time.Hour
	simBlipAt    = 2*time.Hour + 30*time.Minute
	simEnd       = 3*time.Hour + 30*time.Minute
)

type simTarget struct {
	id    string
	kind  simKind
	addrs []string
	good  string // the address that works ("" for none)

	deleted   bool
	connected bool
	connGen   int           // invalidates scheduled drops of older connections
	inboundAt time.Duration // simInbound: when it dials in
	inflight  int
	// failEnd is when the last failure (a failed dial or a fast failure)
	// ended, -1 after anything that legitimately resets the backoff.
	failEnd time.Duration
	// dialsBeforeFirstConnect counts dials until the first success.
	dialsBeforeFirstConnect int
	everConnected           bool
	dialsFirstHour          int

	// From the engine's transitions (the observer): the earliest the next
	// dial may start, and the last retry delay of the current failure run.
	earliest  time.Duration
	lastDelay time.Duration
}

// sim is the world: the Directory, the DialFunc, and the fault script.
type sim struct {
	t     *testing.T
	cfg   Config
	d     *Dialer
	epoch time.Time

	mu      sync.Mutex
	targets []*simTarget
	byID    map[string]*simTarget
	running int
	peak    int
	errs    []string
}

func (s *sim) now() time.Duration { return time.Since(s.epoch) }

// hash gives every (target, n) a fixed pseudo-random number, so the script
// does not depend on goroutine interleaving.
func hash(id string, n int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", id, n)
	return h.Sum64()
}

func between(id string, n int, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(hash(id, n)%uint64(hi-lo))
}

func (s *sim) fail(format string, args ...any) {
	if len(s.errs) < 20 {
		s.errs = append(s.errs, fmt.Sprintf("%v: ", s.now())+fmt.Sprintf(format, args...))
	}
}

// ---- Directory ----------------------------------------------------------------

func (s *sim) Targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.targets))
	for _, tg := range s.targets {
		if !tg.deleted {
			out = append(out, tg.id)
		}
	}
	return out
}

func (s *sim) Eligible(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	tg := s.byID[id]
	return tg != nil && !tg.deleted
}

func (s *sim) Addresses(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tg := s.byID[id]; tg != nil && !tg.deleted {
		return tg.addrs
	}
	return nil
}

func (s *sim) Connected(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	tg := s.byID[id]
	return tg != nil && tg.connected
}

// ---- DialFunc -------------------------------------------------------------------

func (s *sim) dial(ctx context.Context, id, addr string) error {
	s.mu.Lock()
	tg := s.byID[id]
	now := s.now()
	tg.inflight++
	s.running++
	s.peak = max(s.peak, s.running)
	if tg.inflight > 1 {
		s.fail("%s: %d dials at once", id, tg.inflight)
	}
	if s.running > s.cfg.PoolSize {
		s.fail("%d dials in flight, pool is %d", s.running, s.cfg.PoolSize)
	}
	if tg.failEnd >= 0 && now-tg.failEnd < s.cfg.MinRetryInterval {
		s.fail("%s: dialled %v after a failure, Min is %v", id, now-tg.failEnd, s.cfg.MinRetryInterval)
	}
	if now < tg.earliest {
		s.fail("%s: dialled at %v, its backoff allowed %v", id, now, tg.earliest)
	}
	if !tg.everConnected {
		tg.dialsBeforeFirstConnect++
	}
	if now < time.Hour {
		tg.dialsFirstHour++
	}
	works := addr == tg.good && (tg.kind != simInbound || now >= tg.inboundAt)
	latency := between(id, tg.dialsFirstHour+tg.dialsBeforeFirstConnect+int(now/time.Second), 5*time.Millisecond, 200*time.Millisecond)
	switch {
	case works:
	case tg.kind == simUnreachable:
		latency = between(id, int(now/time.Millisecond), time.Second, 3*time.Second) // a timeout
	default:
		latency = between(id, int(now/time.Millisecond), 10*time.Millisecond, 100*time.Millisecond) // refused
	}
	s.mu.Unlock()

	timer := time.NewTimer(latency)
	defer timer.Stop()
	var err error
	select {
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	tg.inflight--
	s.running--
	now = s.now()
	switch {
	case err != nil:
		return err
	case tg.deleted:
		return fmt.Errorf("%s: no such target", id)
	case !works:
		tg.failEnd = now
		return errRefused
	}
	tg.connected = true
	tg.everConnected = true
	tg.failEnd = -1
	tg.connGen++
	if flapping := tg.kind == simFlapping || tg.kind == simFlapEcho; flapping && now < simFlapUntil {
		gen, n := tg.connGen, tg.connGen
		time.AfterFunc(between(id, n, 200*time.Millisecond, 4*time.Second), func() { s.drop(id, gen, n%2 == 0) })
	}
	if tg.kind == simFlapEcho {
		s.d.Connected(id) // our own connection, reported before the result
	}
	return nil
}

// drop ends connection gen of id as a fast failure; dup repeats the report
// a second later, as upstream's close handler did.
func (s *sim) drop(id string, gen int, dup bool) {
	s.mu.Lock()
	tg := s.byID[id]
	if tg.connGen != gen || !tg.connected {
		s.mu.Unlock()
		return
	}
	tg.connected = false
	tg.failEnd = s.now()
	s.mu.Unlock()
	s.d.Disconnected(id)
	if dup {
		time.AfterFunc(time.Second, func() { s.d.Disconnected(id) })
	}
}

// dropNormal ends id's connection after a long life.
func (s *sim) dropNormal(id string) {
	s.mu.Lock()
	tg := s.byID[id]
	was := tg.connected
	tg.connected = false
	tg.connGen++
	tg.failEnd = -1
	s.mu.Unlock()
	if was {
		s.d.Disconnected(id)
	}
}

// ---- the observer: the engine's own schedule -----------------------------------

func (s *sim) observe(r *record, _ State, ev Event, now instant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tg := s.byID[r.id]
	switch ev {
	case EventDialFailed, EventPoolFull, EventLostFast:
		if r.retryDelay < s.cfg.MinRetryInterval || r.retryDelay > s.cfg.MaxRetryInterval {
			s.fail("%s: retry delay %v outside [Min, Max]", r.id, r.retryDelay)
		}
		if r.retryDelay < tg.lastDelay {
			s.fail("%s: retry delay fell from %v to %v within a failure run", r.id, tg.lastDelay, r.retryDelay)
		}
		if r.nextDial != now+r.retryDelay {
			s.fail("%s: next dial %v, want now+delay %v", r.id, r.nextDial, now+r.retryDelay)
		}
		tg.lastDelay = r.retryDelay
		tg.earliest = r.nextDial
	case EventDispatched, EventDialSucceeded:
		// the failure run continues through a successful dial
	default: // a new record, a reset, or a removal
		tg.lastDelay = 0
		tg.earliest = 0
	}
}

// ---- the scenario ----------------------------------------------------------------

func TestSimulation_TenThousandTargets(t *testing.T) {
	const n = 10000
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		// Failing dials hold a slot for their 1–3 s timeout: a pool of 50
		// absorbs the boot without "pool full"; the blip still overruns it.
		cfg.PoolSize = 50
		s := &sim{t: t, cfg: cfg, byID: make(map[string]*simTarget, n)}
		for i := range n {
			tg := &simTarget{id: fmt.Sprintf("agent-%05d", i), kind: simKindOf(i), failEnd: -1}
			tg.addrs = []string{fmt.Sprintf("10.%d.%d.1:9788", i/256, i%256)}
			tg.good = tg.addrs[0]
			switch tg.kind {
			case simUnreachable:
				tg.good = ""
			case simMultiAddr:
				tg.addrs = []string{tg.addrs[0], fmt.Sprintf("10.%d.%d.2:9788", i/256, i%256), fmt.Sprintf("10.%d.%d.3:9788", i/256, i%256)}
				tg.good = tg.addrs[hash(tg.id, 0)%3]
			case simInbound:
				tg.inboundAt = between(tg.id, 1, 10*time.Minute, simFaultsEnd)
			}
			s.targets = append(s.targets, tg)
			s.byID[tg.id] = tg
		}
		d, err := New(cfg, s, s.dial, WithRand(testRand()))
		if err != nil {
			t.Fatal(err)
		}
		d.observe = s.observe
		s.d = d
		s.epoch = time.Now()

		// The fault script, as timers.
		for _, tg := range s.targets {
			id := tg.id
			switch tg.kind {
			case simChurn:
				for k := range 3 {
					at := between(id, 10+k, 10*time.Minute, simFaultsEnd)
					gap := time.Duration(0)
					if k > 0 {
						gap = between(id, 20+k, 0, 10*time.Second)
					}
					time.AfterFunc(at, func() { s.churn(id, gap) })
				}
			case simInbound:
				time.AfterFunc(tg.inboundAt, func() { s.dialIn(id) })
			case simStable:
				if hash(id, 2)%4 == 0 {
					time.AfterFunc(between(id, 3, time.Hour, simFaultsEnd), func() { s.dropNormal(id) })
				}
				time.AfterFunc(simBlipAt, func() { s.dropNormal(id) })
			}
		}

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()

		time.Sleep(simBlipAt - time.Second)
		synctest.Wait()
		s.mu.Lock()
		for _, tg := range s.targets {
			if tg.kind == simMultiAddr && tg.dialsBeforeFirstConnect > 3 {
				s.fail("%s: %d dials before reaching its one working address of 3", tg.id, tg.dialsBeforeFirstConnect)
			}
			if (tg.kind == simFlapping || tg.kind == simFlapEcho) && tg.dialsFirstHour > 60 {
				s.fail("%s: flapping target dialled %d times in the first hour", tg.id, tg.dialsFirstHour)
			}
		}
		s.mu.Unlock()
		poolFullBeforeBlip := d.Stats().PoolFull
		s.mu.Lock()
		t.Logf("peak in flight before the blip: %d of %d", s.peak, cfg.PoolSize)
		s.mu.Unlock()

		time.Sleep(simEnd - s.now())
		synctest.Wait()

		// Every reachable target ends connected; only the unreachable ones
		// are still tracked.
		all, err := d.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tracked := map[string]TargetStatus{}
		for _, st := range all {
			tracked[st.ID] = st
		}
		s.mu.Lock()
		unreachable := 0
		for _, tg := range s.targets {
			if tg.kind == simUnreachable {
				unreachable++
				if st, ok := tracked[tg.id]; !ok || st.State == StateConnected {
					s.fail("unreachable %s: tracked %v as %s", tg.id, ok, st.State)
				}
				continue
			}
			if !tg.connected {
				s.fail("reachable %s (kind %d) is not connected at the end", tg.id, tg.kind)
			}
			if st, ok := tracked[tg.id]; ok {
				s.fail("reachable %s still tracked: %+v", tg.id, st)
			}
		}
		errs := slices.Clone(s.errs)
		peak := s.peak
		s.mu.Unlock()
		for _, e := range errs {
			t.Error(e)
		}

		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// Nothing leaks: the bubble's goroutines are gone (synctest.Test
		// fails otherwise), and the engine holds only the unreachable.
		e := d.engine
		checkHeap(t, e)
		if len(e.records) != unreachable || len(e.inflight) != 0 || e.running != 0 || e.queued != 0 || e.queue.head != len(e.queue.items) {
			t.Errorf("after stop: %d records (want %d), %d in flight, %d running, %d queued",
				len(e.records), unreachable, len(e.inflight), e.running, e.queued)
		}
		for _, r := range e.records {
			if r.state() == StateNeedsDial && r.heapIndex < 0 {
				t.Errorf("%s: NeedsDial but off the heap", r.id)
			}
		}
		st := d.Stats()
		if poolFullBeforeBlip != 0 || st.PoolFull == 0 {
			t.Errorf("pool full %d before the blip, %d after: want 0 then some", poolFullBeforeBlip, st.PoolFull)
		}
		if peak > cfg.PoolSize || peak < cfg.PoolSize {
			t.Errorf("peak in flight %d, want exactly the pool (%d) during the blip", peak, cfg.PoolSize)
		}
		t.Logf("virtual %v: %+v, peak in flight %d", simEnd, st, peak)
	})
}

// churn deletes id and re-creates it gap later (gap 0: in the same instant).
func (s *sim) churn(id string, gap time.Duration) {
	s.mu.Lock()
	tg := s.byID[id]
	tg.deleted = true
	tg.connected = false
	tg.connGen++
	tg.failEnd = -1
	s.mu.Unlock()
	s.d.Deleted(id)
	recreate := func() {
		s.mu.Lock()
		tg.deleted = false
		s.mu.Unlock()
		s.d.Updated(id)
	}
	if gap == 0 {
		recreate()
	} else {
		time.AfterFunc(gap, recreate)
	}
}

// dialIn connects id from its side.
func (s *sim) dialIn(id string) {
	s.mu.Lock()
	tg := s.byID[id]
	if !tg.connected {
		tg.connected = true
		tg.everConnected = true
		tg.connGen++
	}
	tg.failEnd = -1
	s.mu.Unlock()
	s.d.Connected(id)
}
