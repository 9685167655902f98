package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/jpillora/backoff"
	"github.com/rs/zerolog"

	"example.com/pifleet/internal/fsmkit"
)

// Defaults of RedialConfig.
const (
	DefaultConnectTimeout   = 10 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultRetryMin         = 1 * time.Second
	DefaultRetryMax         = 30 * time.Second
)

// RedialConfig configures a Redialer.
type RedialConfig struct {
	// Dial opens the connection (for example a net.Dialer's DialContext
	// bound to the agent's address). Required.
	Dial func(ctx context.Context) (net.Conn, error)
	// Handshake, if set, runs first on the raw connection, before the Conn
	// starts (no heartbeat, no frame read or written but its own): a key
	// handshake that must control every byte. It returns the connection
	// the Conn runs on (nc itself, or a wrapper holding bytes it read
	// ahead). Its errors count as Authenticate's do.
	Handshake func(ctx context.Context, nc net.Conn) (net.Conn, error)
	// Authenticate runs when the TCP connection is up, with the Conn
	// already running (heartbeats, expiry); typically it waits for the
	// peer's hello with Conn.Receive and checks who the peer is. An error
	// that wraps ErrDenied rejects the peer for good (state rejected, Run
	// returns); any other error is a failed handshake and is retried. nil
	// means every peer is allowed.
	Authenticate func(ctx context.Context, c *Conn) error
	// ConnectTimeout bounds one Dial (default 10 s).
	ConnectTimeout time.Duration
	// HandshakeTimeout bounds Authenticate (default 10 s).
	HandshakeTimeout time.Duration
	// RetryMin and RetryMax bound the reconnect delay, which doubles after
	// every failed attempt and restarts at RetryMin once a connection is
	// established: 1 s, 2 s, 4 s … 30 s by default.
	RetryMin, RetryMax time.Duration
	// Conn configures each connection.
	Conn Options
	// OnTransition, if set, is called on the Redialer's goroutine after
	// every transition, in order. It must not block for long.
	OnTransition func(Transition)
	// Logger receives transitions (default: disabled).
	Logger zerolog.Logger
}

// Transition is one step of the connection lifecycle.
type Transition struct {
	From, To ConnState
	Event    ConnEvent
	At       time.Time
	// Err is why the connection was lost, rejected or not made.
	Err error
	// RetryIn is the delay before the next attempt, on entering lost.
	RetryIn time.Duration
	// Conn is the new connection, on entering established.
	Conn *Conn
}

// Redialer keeps one connection to a peer up: the connection lifecycle
// (ConnectionTable) driven by a real connection. It dials,
// authenticates, and after a loss (expiry, close, I/O error) or a failed
// attempt redials after 1 s, 2 s, 4 s … 30 s (jpillora/backoff, factor 2,
// no jitter), starting over at 1 s once a connection was established. A
// rejected peer is never redialled; Close ends it for good.
//
// The machine is owned by the goroutine running Run; State, Conn and
// OnTransition observe it.
type Redialer struct {
	cfg      RedialConfig
	log      zerolog.Logger
	closeReq chan struct{}
	closeOne sync.Once

	mu    sync.Mutex
	state ConnState
	conn  *Conn
}

// NewRedialer returns a Redialer in state connecting; Run starts it.
func NewRedialer(cfg RedialConfig) *Redialer {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.ConnectTimeout, DefaultConnectTimeout)
	def(&cfg.HandshakeTimeout, DefaultHandshakeTimeout)
	def(&cfg.RetryMin, DefaultRetryMin)
	def(&cfg.RetryMax, DefaultRetryMax)
	return &Redialer{
		cfg:      cfg,
		log:      cfg.Logger,
		closeReq: make(chan struct{}),
		state:    ConnectionTable.Initial(),
	}
}

// State returns the current state.
func (r *Redialer) State() ConnState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Conn returns the established connection, or nil in any other state.
func (r *Redialer) Conn() *Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conn
}

// Close ends the Redialer: the current connection is closed and Run
// returns. It does not wait for Run.
func (r *Redialer) Close() {
	r.closeOne.Do(func() { close(r.closeReq) })
}

// ErrRejected is returned by Run when the peer was denied.
var ErrRejected = errors.New("transport: peer rejected")

// Run drives the lifecycle until Close is called or ctx is done (state
// closed, nil returned) or the peer is denied (state rejected; the error
// wraps ErrRejected and the hook's ErrDenied error). Run may be called
// once.
func (r *Redialer) Run(ctx context.Context) error {
	if r.cfg.Dial == nil {
		return errors.New("transport: RedialConfig.Dial is nil")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.closeReq:
			cancel()
		case <-ctx.Done():
		}
	}()

	d := &driver{r: r, m: ConnectionTable.Start()}
	d.retry = &backoff.Backoff{Min: r.cfg.RetryMin, Max: r.cfg.RetryMax, Factor: 2, Jitter: false}
	return d.run(ctx)
}

// driver is the state of one Run: the machine and what belongs to the
// current state, all owned by Run's goroutine.
type driver struct {
	r          *Redialer
	m          fsmkit.Machine[ConnState, ConnEvent]
	retry      *backoff.Backoff
	delay      time.Duration // chosen on entering lost
	conn       *Conn         // while authenticating or established
	rejectedBy error         // the hook's denial, in rejected
}

func (d *driver) run(ctx context.Context) error {
	for {
		switch d.m.State() {
		case StateRejected:
			return fmt.Errorf("%w: %w", ErrRejected, d.rejectedBy)
		case StateClosed:
			return nil
		}
		if ctx.Err() != nil {
			d.closeConn()
			d.fire(EventClose, Transition{})
			continue
		}
		switch d.m.State() {
		case StateConnecting:
			d.connect(ctx)
		case StateEstablished:
			d.watch(ctx)
		case StateLost:
			d.wait(ctx)
		}
	}
}

// connect dials and authenticates: connecting → authenticating →
// established, rejected or lost.
func (d *driver) connect(ctx context.Context) {
	cfg := &d.r.cfg
	dialCtx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	nc, err := cfg.Dial(dialCtx)
	cancel()
	if ctx.Err() != nil {
		if nc != nil {
			nc.Close()
		}
		return // run fires close
	}
	if err != nil {
		d.lose(EventDialFailed, err)
		return
	}
	d.fire(EventTCPEstablished, Transition{})
	authCtx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	if cfg.Handshake != nil {
		raw := nc
		if nc, err = cfg.Handshake(authCtx, raw); err != nil {
			raw.Close()
			nc = nil
		}
	}
	if nc != nil {
		d.conn = NewConn(nc, cfg.Conn)
		if cfg.Authenticate != nil {
			err = cfg.Authenticate(authCtx, d.conn)
		}
	}
	switch {
	case ctx.Err() != nil:
		return // run closes the connection and fires close
	case errors.Is(err, ErrDenied):
		d.closeConn()
		d.rejectedBy = err
		d.fire(EventDenied, Transition{Err: err})
	case err != nil:
		d.closeConn()
		d.lose(EventHandshakeFailed, err)
	default:
		d.retry.Reset()
		d.fire(EventAllowed, Transition{Conn: d.conn})
	}
}

// watch waits while established (the connection's own heartbeats keep it
// up); its end moves to lost.
func (d *driver) watch(ctx context.Context) {
	select {
	case <-d.conn.Done():
		err := d.conn.Err()
		d.conn = nil
		d.lose(EventConnectionLost, err)
	case <-ctx.Done():
	}
}

// wait sits out the reconnect delay in lost.
func (d *driver) wait(ctx context.Context) {
	t := time.NewTimer(d.delay)
	defer t.Stop()
	select {
	case <-t.C:
		d.fire(EventRetry, Transition{})
	case <-ctx.Done():
	}
}

// lose fires one of the events that lead to lost, with the delay chosen
// for the next attempt.
func (d *driver) lose(ev ConnEvent, cause error) {
	d.delay = d.retry.Duration()
	d.fire(ev, Transition{Err: cause, RetryIn: d.delay})
}

func (d *driver) closeConn() {
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
}

// fire applies ev and, when it is valid, publishes the transition. The
// driver is sequential, so a stale event is a bug; it is logged and
// dropped like any stale input.
func (d *driver) fire(ev ConnEvent, t Transition) {
	from := d.m.State()
	if err := d.m.Fire(ev); err != nil {
		d.r.log.Warn().Err(err).Msg("stale connection event dropped")
		return
	}
	t.From, t.To, t.Event, t.At = from, d.m.State(), ev, time.Now()
	r := d.r
	r.mu.Lock()
	r.state = t.To
	switch {
	case t.To != StateEstablished:
		r.conn = nil
	case t.Conn != nil:
		r.conn = t.Conn
	}
	r.mu.Unlock()
	r.log.Info().Str("from", string(from)).Str("to", string(t.To)).Str("event", string(ev)).
		AnErr("cause", t.Err).Dur("retryIn", t.RetryIn).Msg("connection state")
	if r.cfg.OnTransition != nil {
		r.cfg.OnTransition(t)
	}
}
