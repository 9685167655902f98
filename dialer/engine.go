package dialer

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/internal/fsmkit"
)

// engine is the dialer's decision core: the records, the retry heap and the
// pool accounting. It is single-threaded, reads no clock (every method takes
// now) and performs no I/O except through the Directory and start. Dialer.Run
// drives it from one goroutine; tests and benchmarks drive it directly with a
// scripted clock.
type engine struct {
	cfg Config
	dir Directory
	rng *rand.Rand
	log zerolog.Logger
	// start launches a dispatched job. The engine has already counted it as
	// running; the job's result must come back through result.
	start func(*dialJob)

	records map[string]*record
	due     retryHeap
	// inflight maps an id to the job dispatched for it, queued or running.
	// An entry outlives a deleted record until that dial returns, so a
	// re-created record for the id cannot dial alongside it.
	inflight map[string]*dialJob
	queue    jobQueue
	queued   int // live jobs in queue (dropped ones excluded)
	running  int
	order    uint64
	stopping bool // no new dial starts

	stats *counters
	// observe, when set (tests only), sees every successful transition
	// after its action was applied.
	observe func(r *record, from State, ev Event, now instant)
}

func newEngine(cfg Config, dir Directory, rng *rand.Rand, log zerolog.Logger, stats *counters, start func(*dialJob)) *engine {
	return &engine{
		cfg:      cfg,
		dir:      dir,
		rng:      rng,
		log:      log,
		start:    start,
		records:  make(map[string]*record),
		inflight: make(map[string]*dialJob),
		stats:    stats,
	}
}

// ---- triggers --------------------------------------------------------------

// scan creates a record for every untracked target that needs a dial, in
// the directory's order, the k-th new one due k × ScanSpread from now.
// Existing records are left alone.
func (e *engine) scan(now instant) {
	found := 0
	for _, id := range e.dir.Targets() {
		if _, ok := e.records[id]; ok {
			continue
		}
		addrs, ok := e.needsDial(id, nil)
		if !ok {
			continue
		}
		r := e.track(id, addrs)
		r.nextDial = now + time.Duration(found)*e.cfg.ScanSpread
		found++
		e.apply(r, EventScanned, now, nil)
	}
	e.log.Debug().Int("new", found).Int("tracked", len(e.records)).Msg("scan")
}

// updated handles Dialer.Updated: a target was created or changed.
func (e *engine) updated(now instant, id string) {
	r := e.records[id]
	if r == nil {
		if addrs, ok := e.needsDial(id, nil); ok {
			e.apply(e.track(id, addrs), EventUpdated, now, nil)
		}
		return
	}
	switch r.state() {
	case StateConnected:
		// Upstream ignores updates here too: the survival check decides.
		e.log.Debug().Str("id", id).Msg("update ignored while connected")
	case StateNeedsDial, StateDialing:
		addrs, ok := e.eligibleAddrs(id, r.addrs)
		// While Dialing, a connection may well be the dial's own, so only a
		// NeedsDial record is dropped for being connected.
		if !ok || (r.state() == StateNeedsDial && e.dir.Connected(id)) {
			e.remove(r, EventNoEndpoints, now)
			return
		}
		r.setAddrs(addrs) // the schedule is unchanged
	}
}

// disconnected handles Dialer.Disconnected: a connection to id was lost.
func (e *engine) disconnected(now instant, id string) {
	r := e.records[id]
	if r == nil {
		if addrs, ok := e.needsDial(id, nil); ok {
			e.apply(e.track(id, addrs), EventDisconnected, now, nil)
		}
		return
	}
	// Only a Connected record has a connection to lose. For NeedsDial and
	// Dialing the table rejects both events: such a report duplicates a loss
	// already handled and must not reset its backoff.
	e.lost(now, r)
}

// lost applies the seed's connection-lost rule to r: a fast failure inside
// the window, a normal disconnect after it.
func (e *engine) lost(now instant, r *record) {
	if r.lostIsFast(now, &e.cfg) {
		e.apply(r, EventLostFast, now, ErrFastFailure)
	} else {
		e.apply(r, EventLostNormal, now, nil)
	}
}

// connected handles Dialer.Connected: a connection to id is up, possibly
// one the dialer did not make.
func (e *engine) connected(now instant, id string) {
	r := e.records[id]
	if r == nil {
		return // untracked: nothing to do (seed)
	}
	if r.state() == StateDialing {
		// It may be our own dial's connection reported before the dial's
		// result: decide when the result arrives (see result).
		r.connectPending = true
		e.log.Debug().Str("id", id).Msg("connection reported during our dial; held until its result")
		return
	}
	// From Connected the table rejects it: the connection is already
	// accounted for, and resetting would wipe a fast-failure backoff.
	e.apply(r, EventConnectedExternally, now, nil)
}

// deleted handles Dialer.Deleted.
func (e *engine) deleted(now instant, id string) {
	if r := e.records[id]; r != nil {
		e.remove(r, EventDeleted, now)
	}
}

// result handles the end of a dial started by start.
func (e *engine) result(now instant, job *dialJob, err error) {
	e.running--
	e.stats.inFlight.Add(-1)
	if e.inflight[job.id] == job {
		delete(e.inflight, job.id)
	}
	if job.cancel != nil {
		job.cancel() // release the context
	}
	defer e.startQueued()

	r := e.records[job.id]
	if r == nil || r.job != job {
		e.log.Debug().Str("id", job.id).Msg("dropped the result of a dial for a removed record")
		if r != nil && r.waiting {
			// The re-created record waited for this dial; now it may dial.
			r.waiting = false
			e.due.schedule(r)
		}
		return
	}
	r.job = nil
	pending := r.connectPending
	r.connectPending = false
	switch {
	case err == nil:
		e.stats.succeeded.Add(1)
		e.apply(r, EventDialSucceeded, now, nil)
		if !e.dir.Connected(r.id) {
			// The directory reports our connection before the dial returns
			// (DialFunc's contract); it does not, so the connection is gone.
			e.lost(now, r)
		}
	case pending && e.dir.Connected(r.id):
		// Our dial failed but a connection was reported meanwhile, and it
		// is still up: it was the target's own. Honour it and ignore the
		// dial's error.
		e.stats.failed.Add(1)
		e.apply(r, EventConnectedExternally, now, nil)
	default:
		e.stats.failed.Add(1)
		e.apply(r, EventDialFailed, now, err)
	}
}

// ---- the retry heap ----------------------------------------------------------

// dueBatch is the most due records the loop handles in one turn: between
// batches it takes the dials' results and the notices, which records due
// faster than the loop handles them would otherwise hold back (a full
// queue backs thousands off at once, due again together).
const dueBatch = 256

// runDue handles the records due at or before now, earliest first, at
// most limit of them, and reports whether one is still due. A record
// handled twice (a loss that makes it due again at once) counts twice. A
// handled record stays on the heap unless its transition takes it off
// (Dialing, waiting, removed): a rescheduled one is moved in place, half
// the work of a pop and a push.
func (e *engine) runDue(now instant, limit int) (more bool) {
	for range limit {
		r := e.due.peek()
		if r == nil || r.nextDial > now {
			return false
		}
		switch r.state() {
		case StateNeedsDial:
			e.evaluate(now, r)
		case StateConnected:
			e.checkSurvival(now, r)
		default:
			panic("dialer: record " + r.id + " on the retry heap in state " + string(r.state()))
		}
	}
	r := e.due.peek()
	return r != nil && r.nextDial <= now
}

// nextDue returns when the earliest record falls due.
func (e *engine) nextDue() (instant, bool) {
	if r := e.due.peek(); r != nil {
		return r.nextDial, true
	}
	return 0, false
}

// evaluate handles a NeedsDial record that fell due: re-read its addresses,
// then dial, back off for a full pool, or wait for an earlier dial.
func (e *engine) evaluate(now instant, r *record) {
	addrs, ok := e.needsDial(r.id, r.addrs)
	if !ok {
		e.remove(r, EventNoEndpoints, now)
		return
	}
	r.setAddrs(addrs)
	if _, busy := e.inflight[r.id]; busy {
		e.due.remove(r)
		r.waiting = true
		e.log.Debug().Str("id", r.id).Msg("due, waiting for the dial of a deleted record of the same id")
		return
	}
	if e.running >= e.cfg.PoolSize && e.queued >= e.cfg.QueueSize {
		e.stats.poolFull.Add(1)
		e.apply(r, EventPoolFull, now, ErrPoolFull)
		return
	}
	e.apply(r, EventDispatched, now, nil)
}

// checkSurvival handles a Connected record whose fast-failure window ended.
func (e *engine) checkSurvival(now instant, r *record) {
	if e.dir.Connected(r.id) {
		e.remove(r, EventSurvived, now)
		return
	}
	e.lost(now, r)
}

// ---- transitions and their actions ---------------------------------------------

// apply fires ev on r and, when the table accepts it, performs its action.
// A rejected event is a stale input: logged and dropped, nothing changes.
func (e *engine) apply(r *record, ev Event, now instant, cause error) bool {
	from := r.state()
	if err := r.m.Fire(ev); err != nil {
		e.logStale(r, ev, err)
		return false
	}
	switch ev {
	case EventScanned:
		e.due.schedule(r) // scan set nextDial
	case EventUpdated:
		r.nextDial = now
		e.due.schedule(r)
	case EventDisconnected:
		r.reset(now) // the seed's rule for a loss while not Connected
		e.due.schedule(r)
	case EventDispatched:
		e.dispatch(r)
	case EventPoolFull, EventDialFailed:
		r.failed(now, &e.cfg, e.rng, cause)
		e.due.schedule(r)
	case EventLostFast:
		e.stats.fast.Add(1)
		r.failed(now, &e.cfg, e.rng, cause)
		e.due.schedule(r)
	case EventLostNormal:
		r.reset(now)
		e.due.schedule(r)
	case EventDialSucceeded:
		r.succeeded(now, &e.cfg)
		e.due.schedule(r)
	case EventConnectedExternally:
		r.waiting = false
		r.connectedExternally(now, &e.cfg)
		e.due.schedule(r)
	case EventSurvived, EventDeleted, EventNoEndpoints:
		e.forget(r)
	}
	e.logTransition(r, from, ev, now)
	if e.observe != nil {
		e.observe(r, from, ev, now)
	}
	return true
}

// track creates the record for an untracked id, in state None.
func (e *engine) track(id string, addrs []string) *record {
	e.order++
	r := &record{id: id, m: Table.Start(), addrs: addrs, order: e.order, heapIndex: -1}
	e.records[id] = r
	e.stats.tracked.Add(1)
	return r
}

// remove drops r through ev (survived, deleted or noEndpoints).
func (e *engine) remove(r *record, ev Event, now instant) {
	e.apply(r, ev, now, nil)
}

// forget is the action of every transition to Removed.
func (e *engine) forget(r *record) {
	e.due.remove(r)
	delete(e.records, r.id)
	e.stats.tracked.Add(-1)
	e.stats.removals.Add(1)
	if job := r.job; job != nil {
		r.job = nil
		if job.started {
			if job.cancel != nil {
				job.cancel() // its result will find no record and be dropped
			}
		} else {
			job.dropped = true // never started; frees its queue slot now
			e.queued--
			e.stats.queued.Add(-1)
			delete(e.inflight, job.id)
		}
	}
}

// dispatch hands r's dial to the pool, with the address fixed now.
func (e *engine) dispatch(r *record) {
	e.due.remove(r) // Dialing records wait for their result, not the clock
	job := &dialJob{id: r.id, addr: r.address()}
	r.job = job
	e.inflight[r.id] = job
	e.queue.push(job)
	e.queued++
	e.stats.queued.Add(1)
	e.startQueued()
}

// startQueued starts queued dials while the pool has room.
func (e *engine) startQueued() {
	for !e.stopping && e.running < e.cfg.PoolSize {
		job := e.queue.pop()
		if job == nil {
			return
		}
		if job.dropped {
			continue
		}
		e.queued--
		e.stats.queued.Add(-1)
		e.running++
		e.stats.inFlight.Add(1)
		e.stats.started.Add(1)
		job.started = true
		if ev := e.log.Debug(); ev.Enabled() {
			ev.Str("id", job.id).Str("addr", job.addr).Msg("dialing")
		}
		e.start(job)
	}
}

// stop keeps any further dial from starting and forgets the queued ones.
func (e *engine) stop() {
	e.stopping = true
	for job := e.queue.pop(); job != nil; job = e.queue.pop() {
		if !job.dropped {
			job.dropped = true
			e.queued--
			e.stats.queued.Add(-1)
			delete(e.inflight, job.id)
		}
	}
}

// ---- directory lookups ---------------------------------------------------------

// eligibleAddrs returns id's normalised addresses when the directory offers
// any and deems the target eligible. prev is reused when unchanged.
func (e *engine) eligibleAddrs(id string, prev []string) ([]string, bool) {
	if !e.dir.Eligible(id) {
		return nil, false
	}
	raw := e.dir.Addresses(id)
	if len(raw) == 0 {
		return nil, false
	}
	return normalizeAddrs(raw, prev), true
}

// needsDial is the seed's "endpoints needing dial": eligible, with
// addresses, and not connected by any means. prev is the record's current
// list (nil when untracked), reused when unchanged.
func (e *engine) needsDial(id string, prev []string) ([]string, bool) {
	addrs, ok := e.eligibleAddrs(id, prev)
	if !ok || e.dir.Connected(id) {
		return nil, false
	}
	return addrs, true
}

// ---- inspection ------------------------------------------------------------------

// snapshot copies every record, sorted by id. epoch turns instants into
// wall-clock times.
func (e *engine) snapshot(epoch time.Time) []TargetStatus {
	out := make([]TargetStatus, 0, len(e.records))
	for _, r := range e.records {
		s := TargetStatus{
			ID:         r.id,
			State:      r.state(),
			Addresses:  slices.Clone(r.addrs),
			AddrIndex:  int(r.addrIndex),
			Attempts:   int(r.attempts),
			RetryDelay: r.retryDelay,
		}
		if r.heapIndex >= 0 {
			s.NextDial = epoch.Add(r.nextDial)
		}
		if r.state() == StateConnected {
			s.ConnectedAt = epoch.Add(r.connectedAt)
		}
		if r.lastErr != nil {
			s.LastError = r.lastErr.Error()
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b TargetStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// ---- logging -----------------------------------------------------------------------

// transitionLevel is the level of each event's log line: the ones an
// operator watches at Info, trouble at Warn, the rest at Debug.
func transitionLevel(ev Event) zerolog.Level {
	switch ev {
	case EventDialFailed, EventPoolFull, EventLostFast:
		return zerolog.WarnLevel
	case EventDialSucceeded, EventConnectedExternally, EventLostNormal, EventDeleted, EventNoEndpoints:
		return zerolog.InfoLevel
	default:
		return zerolog.DebugLevel
	}
}

func (e *engine) logTransition(r *record, from State, ev Event, now instant) {
	l := e.log.WithLevel(transitionLevel(ev))
	if !l.Enabled() {
		return
	}
	l.Str("id", r.id).Str("event", string(ev)).Str("from", string(from)).Str("to", string(r.state())).
		Int32("attempts", r.attempts).Str("retryDelay", r.retryDelay.String())
	if len(r.addrs) > 0 {
		l.Str("addr", r.address())
	}
	if r.heapIndex >= 0 {
		l.Str("nextDialIn", (r.nextDial - now).String())
	}
	if r.lastErr != nil && ev != EventDispatched {
		l.AnErr("cause", r.lastErr)
	}
	l.Msg("transition")
}

func (e *engine) logStale(r *record, ev Event, err error) {
	var stale *fsmkit.StaleEventError
	if !errors.As(err, &stale) {
		panic(err) // the table has no other failure mode
	}
	e.log.Debug().Str("id", r.id).Str("event", string(ev)).Str("state", string(r.state())).Msg("stale event dropped")
}

// ---- the pool queue ------------------------------------------------------------------

// jobQueue is a FIFO of dispatched jobs waiting for a pool slot.
type jobQueue struct {
	items []*dialJob
	head  int
}

func (q *jobQueue) push(j *dialJob) { q.items = append(q.items, j) }

func (q *jobQueue) pop() *dialJob {
	if q.head == len(q.items) {
		return nil
	}
	j := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 64 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return j
}
