package dialer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Directory tells the dialer which targets exist and how to reach them. The
// dialer calls it only from its loop goroutine, so an implementation needs
// to be safe against its own writers only. Its methods must be quick and
// must not wait for the Dialer.
type Directory interface {
	// Targets lists every known target. A scan spreads the first dials of
	// the new ones in this order.
	Targets() []string
	// Eligible reports whether id should be dialled at all: it exists and
	// is enabled (for the fleet: a known, enabled agent).
	Eligible(id string) bool
	// Addresses returns the addresses to dial id at ("host:port"). The
	// dialer copies, sorts and de-duplicates them, so that rotating to the
	// next address on a failure and back to the first on a reset mean the
	// same thing every time; the caller may reuse the slice.
	Addresses(id string) []string
	// Connected reports whether a connection to id is up now, whichever
	// side made it. It must report a connection made by DialFunc before
	// DialFunc returns, and stop reporting it before Disconnected is called.
	Connected(id string) bool
}

// DialFunc dials one target at one address. It runs on a goroutine of the
// dialer's pool, never more than Config.PoolSize at once, and must return
// when ctx is cancelled (the target was deleted, or Run is stopping): Run
// does not return before every DialFunc has.
//
// A nil error means the connection is up and Directory.Connected(id) already
// reports it; the dialer then watches it through the fast-failure window.
// There is no need to call Dialer.Connected for it as well (doing so is
// harmless, see Connected).
type DialFunc func(ctx context.Context, id, addr string) error

// ErrStopped is returned by Run when the Dialer already ran, and by
// Snapshot when its loop is no longer running.
var ErrStopped = errors.New("dialer: stopped")

// Dialer keeps a set of targets connected: it dials each one that needs a
// connection, backs off on failures, and watches every new connection
// through the fast-failure window. Create it with New, start it with Run,
// and report what happens to targets with Updated, Deleted, Connected and
// Disconnected.
//
// All decisions are made by one goroutine (Run's). The notification
// methods only append to a mailbox under a mutex held just for the append:
// they never wait for the loop, for DialDelay or for the
// pool, and they may be called before Run (they are handled when it
// starts) and after it (they are dropped). The price is an unbounded
// mailbox: a notification occupies 32 bytes until the loop takes it, and
// the loop handles several hundred thousand a second (see BenchmarkLoopNotify).
type Dialer struct {
	cfg  Config
	dir  Directory
	dial DialFunc
	log  zerolog.Logger
	rng  *rand.Rand

	stats counters
	ran   atomic.Bool
	done  chan struct{} // closed when Run has returned

	mu      sync.Mutex
	inbox   []notice
	stopped bool
	wake    chan struct{} // capacity 1: "the inbox is not empty"
	results chan dialResult

	// observe, when set before Run (tests only), is installed as the
	// engine's transition observer.
	observe func(r *record, from State, ev Event, now instant)
	// engine is kept after Run returns so that tests can check for leaks.
	engine *engine
}

// Option configures a Dialer.
type Option func(*Dialer)

// WithLogger sets the logger. Every transition is logged as a "transition"
// line with the target's id, the event, the states before and after, the
// attempts, the retry delay and the address: failures (dialFailed,
// poolFull, lostFast) at Warn; connections made and lost and removals by
// deletion or ineligibility at Info; the rest at Debug, like stale events.
// The default discards everything.
func WithLogger(l zerolog.Logger) Option {
	return func(d *Dialer) { d.log = l }
}

// WithRand sets the source of the backoff jitter. Only the loop goroutine
// uses it. The default is seeded unpredictably.
func WithRand(r *rand.Rand) Option {
	return func(d *Dialer) { d.rng = r }
}

// New returns a Dialer for the targets of dir, dialled with dial. It fails
// with a *ConfigError (errors.Is ErrInvalidConfig) for an invalid cfg.
func New(cfg Config, dir Directory, dial DialFunc, opts ...Option) (*Dialer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dir == nil {
		return nil, errors.New("dialer: nil Directory")
	}
	if dial == nil {
		return nil, errors.New("dialer: nil DialFunc")
	}
	d := &Dialer{
		cfg:     cfg,
		dir:     dir,
		dial:    dial,
		log:     zerolog.Nop(),
		done:    make(chan struct{}),
		wake:    make(chan struct{}, 1),
		results: make(chan dialResult, cfg.PoolSize),
	}
	for _, o := range opts {
		o(d)
	}
	if d.rng == nil {
		d.rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return d, nil
}

// Updated reports that target id was created or changed (addresses,
// eligibility). An untracked target that needs a dial is dialled at once;
// a tracked one has its addresses refreshed, or is dropped if it no longer
// needs a dial.
func (d *Dialer) Updated(id string) { d.post(notice{kind: noticeUpdated, id: id}) }

// Deleted reports that target id is gone. Its record is dropped at once
// and a dial in flight is cancelled; a new record for the same id (it was
// re-created) does not dial until that dial has returned.
func (d *Dialer) Deleted(id string) { d.post(notice{kind: noticeDeleted, id: id}) }

// Connected reports that a connection to id is up that the dialer may not
// have made (the target dialled in). It resets the target's backoff,
// except when it concerns the dialer's own connection: reported while the
// dial is in flight it waits for the dial's result (a success is then our
// own connection and keeps the backoff; after a failure, a connection still
// up is the target's and counts), and reported once Connected it is a no-op.
func (d *Dialer) Connected(id string) { d.post(notice{kind: noticeConnected, id: id}) }

// Disconnected reports that a connection to id was lost. Lost within
// FastFailureWindow of being made, the backoff continues; lost later, the
// target is redialled at once. A repeated report of the same loss is
// ignored. An untracked target is dialled at once if it needs a dial.
func (d *Dialer) Disconnected(id string) { d.post(notice{kind: noticeDisconnected, id: id}) }

// Stats returns the counters and gauges without waiting for the loop.
func (d *Dialer) Stats() Stats { return d.stats.load() }

// Snapshot returns the state of every tracked target, sorted by id. The
// loop answers between two events, so the wait is bounded by ctx; before
// Run has started it waits for Run. It fails with ErrStopped once Run has
// returned.
func (d *Dialer) Snapshot(ctx context.Context) ([]TargetStatus, error) {
	reply := make(chan []TargetStatus, 1)
	if !d.post(notice{kind: noticeSnapshot, reply: reply}) {
		return nil, ErrStopped
	}
	select {
	case s := <-reply:
		return s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-d.done:
		select {
		case s := <-reply:
			return s, nil
		default:
			return nil, ErrStopped
		}
	}
}

// Run runs the dialer until ctx is cancelled; it can run only once (a
// second call returns ErrStopped). It waits DialDelay, scans the directory,
// then dials whatever falls due, waking exactly when the next target is
// due, and rescans every ScanInterval. Notifications are handled
// throughout, DialDelay included. On cancellation it cancels the dials in
// flight, waits for them to return, and returns nil.
func (d *Dialer) Run(ctx context.Context) error {
	if !d.ran.CompareAndSwap(false, true) {
		return ErrStopped
	}
	defer close(d.done)

	dialCtx, cancelDials := context.WithCancel(ctx)
	defer cancelDials()
	epoch := time.Now()
	clock := func() instant { return time.Since(epoch) }

	e := newEngine(d.cfg, d.dir, d.rng, d.log, &d.stats, func(job *dialJob) {
		job.ctx, job.cancel = context.WithCancel(dialCtx)
		go d.dialAndReport(job)
	})
	e.observe = d.observe
	d.engine = e

	d.log.Info().Str("dialDelay", d.cfg.DialDelay.String()).Int("poolSize", d.cfg.PoolSize).Msg("dialer running")
	timer := time.NewTimer(d.cfg.DialDelay)
	defer timer.Stop()
	var (
		open     bool // DialDelay is over
		nextScan instant
		batch    []notice
	)
	for {
		now := clock()
		if !open && now >= d.cfg.DialDelay {
			open = true
			nextScan = now
		}
		if open {
			if now >= nextScan {
				e.scan(now)
				nextScan = now + d.cfg.ScanInterval
			}
			e.runDue(now, dueBatch)
		}
		wakeAt := d.cfg.DialDelay
		if open {
			wakeAt = nextScan
			if due, ok := e.nextDue(); ok && due < wakeAt {
				wakeAt = due
			}
		}
		timer.Reset(max(wakeAt-now, 0))

		select {
		case <-ctx.Done():
			d.shutdown(e, epoch, clock)
			return nil
		case <-timer.C:
		case <-d.wake:
			batch = d.take(batch)
			now := clock()
			for i := range batch {
				d.handle(e, now, epoch, &batch[i])
			}
			clear(batch) // drop the ids and reply channels for the GC
		case r := <-d.results:
			e.result(clock(), r.job, r.err)
		}
	}
}

// dialAndReport runs on a pool goroutine: the job is its only shared
// state, and it was complete before the goroutine started.
func (d *Dialer) dialAndReport(job *dialJob) {
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("dialer: DialFunc panicked: %v", p)
				d.log.Error().Str("id", job.id).Err(err).Msg("dial panicked")
			}
		}()
		err = d.dial(job.ctx, job.id, job.addr)
	}()
	// Never blocks: the channel holds PoolSize results and at most
	// PoolSize dials run.
	d.results <- dialResult{job: job, err: err}
}

func (d *Dialer) handle(e *engine, now instant, epoch time.Time, n *notice) {
	switch n.kind {
	case noticeUpdated:
		e.updated(now, n.id)
	case noticeDeleted:
		e.deleted(now, n.id)
	case noticeConnected:
		e.connected(now, n.id)
	case noticeDisconnected:
		e.disconnected(now, n.id)
	case noticeSnapshot:
		n.reply <- e.snapshot(epoch) // buffered: never blocks
	}
}

// shutdown stops the loop: no more notifications are taken, queued dials
// are forgotten, running ones are cancelled and awaited.
func (d *Dialer) shutdown(e *engine, epoch time.Time, clock func() instant) {
	d.mu.Lock()
	d.stopped = true
	pending := d.inbox
	d.inbox = nil
	d.mu.Unlock()
	for i := range pending {
		if n := &pending[i]; n.kind == noticeSnapshot {
			n.reply <- e.snapshot(epoch)
		}
	}
	e.stop()
	// The running dials' contexts derive from Run's, which is cancelled.
	for e.running > 0 {
		r := <-d.results
		e.result(clock(), r.job, r.err)
	}
	d.log.Info().Msg("dialer stopped")
}

// ---- the mailbox -------------------------------------------------------------

type noticeKind uint8

const (
	noticeUpdated noticeKind = iota + 1
	noticeDeleted
	noticeConnected
	noticeDisconnected
	noticeSnapshot
)

type notice struct {
	kind  noticeKind
	id    string
	reply chan<- []TargetStatus
}

type dialResult struct {
	job *dialJob
	err error
}

// post appends n to the mailbox and wakes the loop. It reports false once
// the loop has stopped.
func (d *Dialer) post(n notice) bool {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return false
	}
	d.inbox = append(d.inbox, n)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default: // already signalled
	}
	return true
}

// take swaps the mailbox for spare (emptied) and returns what was in it.
func (d *Dialer) take(spare []notice) []notice {
	d.mu.Lock()
	batch := d.inbox
	d.inbox = spare[:0]
	d.mu.Unlock()
	return batch
}
