package dialer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestMain(m *testing.M) {
	trace := fsmtest.StartTrace(fsmtest.Checks{Cover: []fsmtest.Coverage{fsmtest.Cover(Table)}})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}

// memDirectory is an in-memory Directory whose entries tests change at will.
type memDirectory struct {
	mu      sync.Mutex
	order   []string
	entries map[string]*memEntry
}

type memEntry struct {
	addrs     []string
	eligible  bool
	connected bool
}

func newMemDirectory() *memDirectory {
	return &memDirectory{entries: map[string]*memEntry{}}
}

// add creates or replaces an eligible, unconnected target.
func (m *memDirectory) add(id string, addrs ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entries[id]; !ok {
		m.order = append(m.order, id)
	}
	m.entries[id] = &memEntry{addrs: addrs, eligible: true}
}

func (m *memDirectory) remove(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, id)
	m.order = slices.DeleteFunc(m.order, func(s string) bool { return s == id })
}

func (m *memDirectory) set(id string, f func(*memEntry)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[id]; ok {
		f(e)
	}
}

func (m *memDirectory) setConnected(id string, c bool) {
	m.set(id, func(e *memEntry) { e.connected = c })
}

func (m *memDirectory) Targets() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.order)
}

func (m *memDirectory) Eligible(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[id]
	return ok && e.eligible
}

func (m *memDirectory) Addresses(id string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[id]; ok {
		return slices.Clone(e.addrs)
	}
	return nil
}

func (m *memDirectory) Connected(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[id]
	return ok && e.connected
}

// testConfig is DefaultConfig without the boot delay.
func testConfig() Config {
	c := DefaultConfig()
	c.DialDelay = 0
	return c
}

func testRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// ---- the engine, driven directly with a scripted clock ---------------------------

// allDue is a runDue limit that handles every due record in one call.
const allDue = math.MaxInt

// engineRig drives an engine without goroutines: started dials are
// collected, and the test delivers their results.
type engineRig struct {
	t   *testing.T
	e   *engine
	dir *memDirectory
	now instant
	// started lists every dial started, in order.
	started []*dialJob
}

func newEngineRig(t *testing.T, cfg Config) *engineRig {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := &engineRig{t: t, dir: newMemDirectory()}
	g.e = newEngine(cfg, g.dir, testRand(), zerolog.New(zerolog.NewTestWriter(t)), &counters{}, func(j *dialJob) {
		g.started = append(g.started, j)
	})
	return g
}

func (g *engineRig) rec(id string) *record { return g.e.records[id] }

// at moves the clock to now+d and handles whatever fell due.
func (g *engineRig) advance(d time.Duration) {
	g.now += d
	g.e.runDue(g.now, allDue)
}

// lastDial returns the last dial started for id.
func (g *engineRig) lastDial(id string) *dialJob {
	g.t.Helper()
	for i := len(g.started) - 1; i >= 0; i-- {
		if g.started[i].id == id {
			return g.started[i]
		}
	}
	g.t.Fatalf("no dial of %s started", id)
	return nil
}

// finish delivers the result of id's last dial; a nil err also marks the
// target connected, as DialFunc's contract requires.
func (g *engineRig) finish(id string, err error) {
	g.t.Helper()
	if err == nil {
		g.dir.setConnected(id, true)
	}
	g.e.result(g.now, g.lastDial(id), err)
}

// dialNow tracks id via Updated and lets its first dial start.
func (g *engineRig) dialNow(id string) *record {
	g.t.Helper()
	g.e.updated(g.now, id)
	g.e.runDue(g.now, allDue)
	r := g.rec(id)
	if r == nil || r.state() != StateDialing {
		g.t.Fatalf("%s not dialling after Updated: %+v", id, r)
	}
	return r
}

// checkHeap verifies the heap invariant, the stored indexes, and that every
// record on the heap is tracked and is there once.
func checkHeap(t *testing.T, e *engine) {
	t.Helper()
	seen := map[*record]bool{}
	for i, slot := range e.due {
		r := slot.r
		if seen[r] {
			t.Fatalf("record %s on the heap twice", r.id)
		}
		if slot.at != r.nextDial || slot.order != r.order {
			t.Fatalf("record %s: heap key (%v, %d) out of date, record says (%v, %d)", r.id, slot.at, slot.order, r.nextDial, r.order)
		}
		seen[r] = true
		if int(r.heapIndex) != i {
			t.Fatalf("record %s at %d believes it is at %d", r.id, i, r.heapIndex)
		}
		if e.records[r.id] != r {
			t.Fatalf("heap holds %s, which is not the tracked record", r.id)
		}
		if i > 0 && e.due.less(i, (i-1)/heapArity) {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	for id, r := range e.records {
		if r.heapIndex >= 0 && !seen[r] {
			t.Fatalf("record %s claims heap index %d but is not on the heap", id, r.heapIndex)
		}
	}
}

// ---- the whole Dialer, inside a synctest bubble ------------------------------

// dialStart is one call of the rig's DialFunc.
type dialStart struct {
	id, addr string
	at       time.Time
}

// outcome scripts one dial: it takes latency (or waits for release when
// set), then fails with err or, for nil, connects. A cancelled dial returns
// at once unless ignoreCancel (a dial stuck in a kernel connect).
type outcome struct {
	latency      time.Duration
	release      <-chan struct{}
	err          error
	ignoreCancel bool
}

// rig runs a real Dialer against a memDirectory. Create it inside a
// synctest bubble; DialFunc calls follow script.
type rig struct {
	t      *testing.T
	dir    *memDirectory
	d      *Dialer
	cfg    Config
	cancel context.CancelFunc
	done   chan error

	mu       sync.Mutex
	script   func(id, addr string) outcome
	starts   []dialStart
	inflight map[string]int
	running  int
	peak     int
}

func newRig(t *testing.T, cfg Config, opts ...Option) *rig {
	t.Helper()
	r := &rig{
		t:        t,
		dir:      newMemDirectory(),
		cfg:      cfg,
		inflight: map[string]int{},
		script:   func(string, string) outcome { return outcome{} },
	}
	opts = append([]Option{WithRand(testRand()), WithLogger(zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))}, opts...)
	d, err := New(cfg, r.dir, r.dial, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	return r
}

// start runs the dialer until its loop waits (after the first scan when
// DialDelay is zero); stop (registered as cleanup too) ends it.
func (r *rig) start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan error, 1)
	go func() { r.done <- r.d.Run(ctx) }()
	r.t.Cleanup(r.stop)
	synctest.Wait()
}

func (r *rig) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		r.t.Errorf("Run: %v", err)
	}
}

func (r *rig) setScript(f func(id, addr string) outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = f
}

func (r *rig) dial(ctx context.Context, id, addr string) error {
	r.mu.Lock()
	r.starts = append(r.starts, dialStart{id: id, addr: addr, at: time.Now()})
	r.inflight[id]++
	if r.inflight[id] > 1 {
		r.t.Errorf("%s: %d dials in flight at once", id, r.inflight[id])
	}
	r.running++
	r.peak = max(r.peak, r.running)
	o := r.script(id, addr)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight[id]--
		r.running--
		r.mu.Unlock()
	}()

	cancelled := ctx.Done()
	if o.ignoreCancel {
		cancelled = nil
	}
	if o.latency > 0 {
		t := time.NewTimer(o.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-cancelled:
			return ctx.Err()
		}
	}
	if o.release != nil {
		select {
		case <-o.release:
		case <-cancelled:
			return ctx.Err()
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if o.err == nil {
		r.dir.setConnected(id, true)
	}
	return o.err
}

// dials returns the dials started so far, for id only when id != "".
func (r *rig) dials(id string) []dialStart {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []dialStart
	for _, s := range r.starts {
		if id == "" || s.id == id {
			out = append(out, s)
		}
	}
	return out
}

// status returns id's snapshot entry, or ok=false when untracked.
func (r *rig) status(id string) (TargetStatus, bool) {
	r.t.Helper()
	all, err := r.d.Snapshot(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	for _, s := range all {
		if s.ID == id {
			return s, true
		}
	}
	return TargetStatus{}, false
}

// mustStatus is status for a target that must be tracked in state want.
func (r *rig) mustStatus(id string, want State) TargetStatus {
	r.t.Helper()
	s, ok := r.status(id)
	if !ok {
		r.t.Fatalf("%s is not tracked, want %s", id, want)
	}
	if s.State != want {
		r.t.Fatalf("%s is %s, want %s (%+v)", id, s.State, want, s)
	}
	return s
}

func (r *rig) mustUntracked(id string) {
	r.t.Helper()
	if s, ok := r.status(id); ok {
		r.t.Fatalf("%s is still tracked: %+v", id, s)
	}
}

// advance lets virtual time pass, then waits until every goroutine of the
// bubble is blocked again.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// inBubble runs f in a synctest bubble.
func inBubble(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, f)
}

var errRefused = errors.New("connection refused")

func addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.0.0.%d:9788", i+1)
	}
	return out
}
