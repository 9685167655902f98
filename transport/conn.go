package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/internal/rawio"
)

// Defaults of Options.
const (
	DefaultHeartbeatInterval = 15 * time.Second
	DefaultExpiryTimeout     = 45 * time.Second
	DefaultRequestTimeout    = 60 * time.Second
	DefaultSendQueue         = 256
	DefaultInboxSize         = 1024
	DefaultLingerTimeout     = 2 * time.Second
)

// Options configure a Conn. The zero value gives the protocol's defaults.
type Options struct {
	// HeartbeatInterval is how often a heartbeat is sent (default 15 s);
	// a round skips a connection that wrote anything else since half an
	// interval ago, as any byte re-arms the peer's expiry.
	HeartbeatInterval time.Duration
	// ExpiryTimeout closes the connection (ReasonExpired) when nothing at
	// all has been received for this long; any incoming byte, even of a
	// partial or invalid record, re-arms it (default 45 s).
	ExpiryTimeout time.Duration
	// StallTimeout closes the connection (ReasonStalled) when one write
	// cannot complete for this long: the peer has stopped reading
	// (default: ExpiryTimeout).
	StallTimeout time.Duration
	// RequestTimeout bounds a Request whose context has no deadline
	// (default 60 s).
	RequestTimeout time.Duration
	// SendQueue is how many encoded frames may wait for the writer
	// (default 256). See Send and TrySend for what happens when it is full.
	SendQueue int
	// SendQueueBytes, when positive, also bounds the queue in encoded
	// bytes: a frame that would take the bytes waiting past it waits (Send)
	// or is refused (TrySend, ErrSendQueueFull), unless the queue is empty
	// (one frame of any size always fits). Zero bounds frames only.
	SendQueueBytes int
	// InboxSize is how many unsolicited frames may wait for the handler
	// (default 1024). When it is full the reader stops reading, so TCP
	// flow control slows the peer down instead of memory growing.
	InboxSize int
	// LingerTimeout bounds how long a connection closed for a protocol
	// version mismatch keeps draining input after its error frame, so that
	// the peer reads the error instead of a reset (default 2 s).
	LingerTimeout time.Duration
	// Handler receives unsolicited frames (everything that is neither a
	// heartbeat nor the response to a pending Request), in arrival order,
	// on one goroutine. It may also be set later with SetHandler; frames
	// that arrive before are queued.
	Handler func(Frame)
	// Heartbeats, if set, sends this connection's heartbeats together with
	// those of the other connections sharing it (a server's agents), from
	// one goroutine; without it the Conn gets one of its own.
	Heartbeats *Heartbeats
	// OnHeartbeat, if set, is called from the reader goroutine for every
	// heartbeat received. It must not block.
	OnHeartbeat func()
	// NewID mints request ids (default RandomRequestID).
	NewID func() string
	// Logger receives connection events (default: disabled).
	Logger zerolog.Logger
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&o.ExpiryTimeout, DefaultExpiryTimeout)
	def(&o.StallTimeout, o.ExpiryTimeout)
	def(&o.RequestTimeout, DefaultRequestTimeout)
	def(&o.LingerTimeout, DefaultLingerTimeout)
	if o.SendQueue <= 0 {
		o.SendQueue = DefaultSendQueue
	}
	if o.InboxSize <= 0 {
		o.InboxSize = DefaultInboxSize
	}
	if o.NewID == nil {
		o.NewID = RandomRequestID
	}
	return o
}

// RandomRequestID returns "r-" and 12 random hex digits, like the
// TypeScript pi-fleet's request ids.
func RandomRequestID() string {
	var b [6]byte
	rand.Read(b[:])
	return "r-" + hex.EncodeToString(b[:])
}

// CloseReason says why a connection closed. Each reason is also an error,
// so errors.Is(conn.Err(), ReasonExpired) works.
type CloseReason string

// Close reasons.
const (
	// ReasonClosed: Close was called on this side.
	ReasonClosed CloseReason = "closed"
	// ReasonPeerClosed: the peer ended the stream.
	ReasonPeerClosed CloseReason = "peer_closed"
	// ReasonExpired: nothing was received for ExpiryTimeout.
	ReasonExpired CloseReason = "expired"
	// ReasonStalled: a write was blocked for StallTimeout; the peer is not
	// reading.
	ReasonStalled CloseReason = "stalled"
	// ReasonProtocol: the peer speaks another protocol version; it was
	// told so with an error frame first.
	ReasonProtocol CloseReason = "protocol_error"
	// ReasonIO: the socket failed.
	ReasonIO CloseReason = "io_error"
)

// Error returns the reason itself.
func (r CloseReason) Error() string { return string(r) }

// ErrClosed is matched (errors.Is) by every error that reports a closed
// connection.
var ErrClosed = errors.New("transport: connection closed")

// ErrSendQueueFull is returned by TrySend when the send queue is full.
var ErrSendQueueFull = errors.New("transport: send queue full")

// ErrHandlerSet is returned by Receive once a handler receives the frames.
var ErrHandlerSet = errors.New("transport: a handler is set; frames go to it")

// ClosedError is the error of a closed connection: why, and the underlying
// cause when there is one (an I/O error, the *ProtocolError of a version
// mismatch).
type ClosedError struct {
	Reason CloseReason
	Err    error
}

// Error says that the connection closed, why, and the cause if any.
func (e *ClosedError) Error() string {
	if e.Err == nil {
		return "transport: connection closed: " + string(e.Reason)
	}
	return fmt.Sprintf("transport: connection closed: %s: %v", e.Reason, e.Err)
}

// Is matches ErrClosed and the error's Reason.
func (e *ClosedError) Is(target error) bool {
	return target == ErrClosed || target == e.Reason
}

// Unwrap returns the cause.
func (e *ClosedError) Unwrap() error { return e.Err }

// Conn is one protocol connection over a net.Conn: a reader goroutine
// decodes frames, a writer goroutine writes them in order, heartbeats run
// both ways, requests are matched to responses by id.
//
// Send policy: frames are encoded by the caller and queued (SendQueue
// frames deep, and at most SendQueueBytes encoded bytes when that is set)
// for the writer. Send waits for room as long as its context allows;
// TrySend fails at once with ErrSendQueueFull. Heartbeats do not go
// through the queue, so a full queue never delays them. A peer that stops
// reading blocks the writer; after StallTimeout the connection closes with
// ReasonStalled, and every blocked Send returns.
//
// Every method is safe for concurrent use.
type Conn struct {
	nc net.Conn // its addresses, deadlines and close
	// sock is nc as the reader, the writer and the linger read and write
	// it: raw where nc is a plain socket (see rawSocket), with raw set
	// then, else nc itself. raw lets the heartbeat goroutine write
	// without waiting; nil, heartbeats go through the writer.
	sock io.ReadWriter
	raw  *rawio.Conn
	opts Options
	log  zerolog.Logger

	sendq chan *[]byte
	inbox *inbox
	// queued is the encoded bytes in sendq; drained wakes a Send waiting
	// for SendQueueBytes to allow its frame (the writer took frames).
	queued  atomic.Int64
	drained chan struct{}

	done      chan struct{}
	closeOnce sync.Once
	err       *ClosedError // set before done is closed
	final     []byte       // written before the socket closes, if set

	mu      sync.Mutex
	pending map[string]chan Frame // by request id
	onClose []func()              // started as the connection closes (OnClose)

	// roomMu guards room and roomWaiters: AwaitRoom waits on room, which
	// the writer closes (and replaces) after it took frames off the queue
	// while someone waits.
	roomMu      sync.Mutex
	room        chan struct{}
	roomWaiters int

	// wmu is held for every write to nc, so that the heartbeat goroutine
	// (Heartbeats) writes only between the writer's writes. beatRest is
	// what a partial heartbeat write left: the next write starts with it.
	wmu      sync.Mutex
	beatRest []byte
	beatDue  chan struct{} // the writer is to send a heartbeat
	beats    *Heartbeats
	// handedOff counts the heartbeats handed to the writer (its tests).
	handedOff atomic.Int64
	// beatsOff is set by StopHeartbeats; a heartbeat not yet begun
	// checks it under wmu.
	beatsOff atomic.Bool
	// sentAt is when a write last began, as time since opened (a
	// monotonic reading): a round skips the heartbeat of a connection
	// that wrote since half an interval ago (see Heartbeats).
	opened time.Time
	sentAt atomic.Int64
	// closed is set as done is closed: the heartbeat round reads it
	// with sentAt, where reading done would cost a cache miss per
	// connection and round.
	closed atomic.Bool
	// heardAt is when a byte last arrived and armed the expiry the read
	// deadline holds, both as time since opened; the reader goroutine
	// alone uses them (see expiryReader).
	heardAt, armed time.Duration
	// tcpWatched is set by WatchTCP: TCP detects the loss of the
	// connection, the receive expiry is off.
	tcpWatched atomic.Bool

	handler     atomic.Pointer[func(Frame)]
	dispatching atomic.Bool // a handler was set: the inbox delivers to it
}

// NewConn starts a Conn over nc. It sets TCP_NODELAY when nc is TCP, so
// that small request/response frames do not wait for delayed ACKs.
func NewConn(nc net.Conn, opts Options) *Conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true) // only fails on a closed socket, which the reader reports
	}
	opts = opts.withDefaults()
	c := &Conn{
		nc:      nc,
		opts:    opts,
		log:     opts.Logger.With().Str("remote", nc.RemoteAddr().String()).Logger(),
		sendq:   make(chan *[]byte, opts.SendQueue),
		drained: make(chan struct{}, 1),
		inbox:   newInbox(opts.InboxSize),
		done:    make(chan struct{}),
		pending: make(map[string]chan Frame),
		room:    make(chan struct{}),
		beatDue: make(chan struct{}, 1),
		beats:   opts.Heartbeats,
		opened:  time.Now(),
	}
	c.sock = nc
	if c.raw = rawSocket(nc); c.raw != nil {
		c.sock = c.raw
	}
	c.sentAt.Store(-int64(opts.HeartbeatInterval)) // nothing written yet: the first round beats
	// The expiry counts from now; this also replaces a deadline the
	// caller's handshake left (expiryReader moves it only when it is
	// well behind).
	c.armed = opts.ExpiryTimeout
	_ = nc.SetReadDeadline(c.opened.Add(c.armed))
	if c.beats == nil {
		c.beats = NewHeartbeats()
	}
	c.beats.join(c) // before anything can close c: closing leaves
	go c.readLoop()
	go c.writeLoop()
	if opts.Handler != nil {
		c.SetHandler(opts.Handler)
	}
	return c
}

// NetConn returns the underlying connection (for its addresses; reading
// or writing it directly would corrupt the stream).
func (c *Conn) NetConn() net.Conn { return c.nc }

// Done is closed when the connection is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// OnClose makes fn run once, on a goroutine of its own, when the
// connection closes (at once if it is closed already). It is the cheap
// way to act on a close: no goroutine waits on Done meanwhile, which
// counts when a server holds thousands of idle connections.
func (c *Conn) OnClose(fn func()) {
	c.mu.Lock()
	closed := c.closed.Load() // set before closeWith takes the hooks under mu
	if !closed {
		c.onClose = append(c.onClose, fn)
	}
	c.mu.Unlock()
	if closed {
		go fn()
	}
}

// Err returns nil while the connection is open, then a *ClosedError that
// says why it closed.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Close closes the connection (ReasonClosed unless it was already closed
// for another reason). Queued frames are dropped, pending requests fail.
// Close is idempotent and always returns nil.
func (c *Conn) Close() error {
	c.closeWith(ReasonClosed, nil, nil)
	_ = c.nc.Close() // also cuts short a linger after a protocol error
	return nil
}

// closeWith records the first reason and closes. With a final frame the
// writer writes it and shuts the socket down itself; otherwise the socket
// is closed at once.
func (c *Conn) closeWith(reason CloseReason, cause error, final []byte) {
	c.closeOnce.Do(func() {
		c.err = &ClosedError{Reason: reason, Err: cause}
		c.final = final
		c.closed.Store(true)
		close(c.done)
		c.mu.Lock()
		hooks := c.onClose
		c.onClose = nil
		c.mu.Unlock()
		for _, fn := range hooks {
			go fn()
		}
		c.beats.leave(c)
		ev := c.log.Debug()
		if reason != ReasonClosed {
			ev = c.log.Info()
		}
		ev.Str("reason", string(reason)).AnErr("cause", cause).Msg("connection closed")
		if final == nil {
			_ = c.nc.Close()
		}
	})
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// putBuf returns an encoding buffer to the pool, unless one huge frame
// made it too big to keep around.
func putBuf(b *[]byte) {
	if cap(*b) <= maxBatch {
		bufPool.Put(b)
	}
}

func (c *Conn) encode(f Frame) (*[]byte, error) {
	buf := bufPool.Get().(*[]byte)
	out, err := AppendFrame((*buf)[:0], f)
	if err != nil {
		putBuf(buf)
		return nil, err
	}
	*buf = out
	return buf, nil
}

// Send encodes f and queues it for the writer, waiting for room in the
// queue (SendQueue frames, SendQueueBytes bytes) as long as ctx allows. It
// returns once the frame is queued (frames are written in queue order); a
// frame still queued when the connection closes is dropped.
func (c *Conn) Send(ctx context.Context, f Frame) error {
	if err := c.Err(); err != nil {
		return err
	}
	buf, err := c.encode(f)
	if err != nil {
		return err
	}
	for !c.reserve(len(*buf)) {
		select {
		case <-c.drained:
		case <-c.done:
			putBuf(buf)
			return c.err
		case <-ctx.Done():
			putBuf(buf)
			return fmt.Errorf("transport: send %s: %w", f.FrameType(), ctx.Err())
		}
	}
	select {
	case c.sendq <- buf:
		return nil
	case <-c.done:
		c.unreserve(len(*buf))
		putBuf(buf)
		return c.err
	case <-ctx.Done():
		c.unreserve(len(*buf))
		putBuf(buf)
		return fmt.Errorf("transport: send %s: %w", f.FrameType(), ctx.Err())
	}
}

// TrySend is Send without waiting: it fails with ErrSendQueueFull when the
// queue holds SendQueue frames or has no room for f's bytes.
func (c *Conn) TrySend(f Frame) error {
	if err := c.Err(); err != nil {
		return err
	}
	buf, err := c.encode(f)
	if err != nil {
		return err
	}
	if c.reserve(len(*buf)) {
		select {
		case c.sendq <- buf:
			return nil
		default:
			c.unreserve(len(*buf))
		}
	}
	putBuf(buf)
	if err := c.Err(); err != nil {
		return err
	}
	return ErrSendQueueFull
}

// QueuedBytes is how many encoded bytes wait for the writer now.
func (c *Conn) QueuedBytes() int { return int(c.queued.Load()) }

// reserve counts n more queued bytes when SendQueueBytes allows them (an
// empty queue takes a frame of any size).
func (c *Conn) reserve(n int) bool {
	limit := int64(c.opts.SendQueueBytes)
	for {
		cur := c.queued.Load()
		if limit > 0 && cur > 0 && cur+int64(n) > limit {
			return false
		}
		if c.queued.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

// unreserve gives back n queued bytes (taken by the writer, or a frame
// that was not queued after all) and wakes a Send waiting for room.
func (c *Conn) unreserve(n int) {
	c.queued.Add(-int64(n))
	select {
	case c.drained <- struct{}{}:
	default:
	}
}

// HasRoom reports whether the send queue has room for a frame now, as
// AwaitRoom would: the room is not reserved. A caller that must change
// state only when its frame can be queued checks it first.
func (c *Conn) HasRoom() bool {
	if c.Err() != nil {
		return false
	}
	limit := int64(c.opts.SendQueueBytes)
	return len(c.sendq) < cap(c.sendq) && (limit <= 0 || c.queued.Load() < limit)
}

// AwaitRoom waits until the send queue has room for a frame, the
// connection closes (it returns the connection's *ClosedError) or ctx
// ends (it returns ctx.Err()). The room is not reserved: another sender
// can take it first. It is for callers that must not block while they
// hold a lock: TrySend under the lock and, on ErrSendQueueFull, AwaitRoom
// without it, then try again.
func (c *Conn) AwaitRoom(ctx context.Context) error {
	c.roomMu.Lock()
	c.roomWaiters++
	c.roomMu.Unlock()
	defer func() {
		c.roomMu.Lock()
		c.roomWaiters--
		c.roomMu.Unlock()
	}()
	for {
		c.roomMu.Lock()
		room := c.room
		c.roomMu.Unlock()
		// Checked after taking room: a frame taken off the queue from now
		// on closes it.
		if err := c.Err(); err != nil {
			return err
		}
		if len(c.sendq) < cap(c.sendq) {
			return nil
		}
		select {
		case <-room:
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// madeRoom wakes the AwaitRoom callers after the writer took frames off
// the queue.
func (c *Conn) madeRoom() {
	c.roomMu.Lock()
	if c.roomWaiters > 0 {
		close(c.room)
		c.room = make(chan struct{})
	}
	c.roomMu.Unlock()
}

// Request sends f and waits for the frame that carries the same id. When f
// has no id, one is minted (NewID) and set on f. Without a deadline on ctx
// the wait is bounded by RequestTimeout. An error frame in answer is
// returned with a *RemoteError; a closed connection fails the request at
// once with the connection's *ClosedError. An answer that arrives after
// Request gave up is delivered to the handler like any unsolicited frame.
func (c *Conn) Request(ctx context.Context, f Frame) (Frame, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	h := f.Envelope()
	if h.ID == "" {
		h.ID = c.opts.NewID()
	}
	id := h.ID
	reply := make(chan Frame, 1)
	c.mu.Lock()
	if _, dup := c.pending[id]; dup {
		c.mu.Unlock()
		return nil, fmt.Errorf("transport: request id %q is already pending", id)
	}
	c.pending[id] = reply
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	if err := c.Send(ctx, f); err != nil {
		return nil, err
	}
	select {
	case r := <-reply:
		return r, remoteError(r)
	case <-ctx.Done():
		return nil, fmt.Errorf("transport: %s request %s: %w", f.FrameType(), id, ctx.Err())
	case <-c.done:
		select {
		case r := <-reply: // answered just before the close
			return r, remoteError(r)
		default:
			return nil, c.err
		}
	}
}

func remoteError(f Frame) error {
	if e, ok := f.(*ErrorFrame); ok {
		return &RemoteError{Code: e.Code, Message: e.Message}
	}
	return nil
}

// SetHandler makes h receive the unsolicited frames, starting with those
// queued so far, in arrival order, one at a time (on a goroutine that
// runs while frames wait, none while the connection is idle). A later call replaces
// the handler. h should not block for long: while it does, frames queue
// up to InboxSize and then the reader stops reading. In particular h must
// not wait for the answer to a Request on the same connection while many
// frames are queued; start a goroutine for that.
func (c *Conn) SetHandler(h func(Frame)) {
	if h == nil {
		return
	}
	c.handler.Store(&h)
	if c.dispatching.CompareAndSwap(false, true) {
		c.inbox.deliverTo(c.dispatch)
	}
}

// dispatch hands the waiting frames to the handler and returns when none
// waits; the inbox starts it again for the next frame. Frames received
// before a close are still delivered.
func (c *Conn) dispatch() {
	for {
		f, ok := c.inbox.next()
		if !ok {
			return
		}
		(*c.handler.Load())(f)
	}
}

// Receive returns the next unsolicited frame while no handler is set: a
// handshake step such as waiting for the peer's hello. It returns
// ErrHandlerSet once a handler is set, and the connection's error when it
// is closed and no frame is left. Do not call it concurrently with
// SetHandler.
func (c *Conn) Receive(ctx context.Context) (Frame, error) {
	if c.dispatching.Load() {
		return nil, ErrHandlerSet
	}
	f, ok, cancelled := c.inbox.take(ctx.Done())
	switch {
	case cancelled:
		return nil, ctx.Err()
	case !ok:
		return nil, c.Err()
	}
	return f, nil
}

// expiryReader keeps the expiry: any byte that arrives re-arms it, and
// the connection expires exactly ExpiryTimeout after the last one. It
// notes when the last byte came (heardAt) and moves the read deadline
// only when the expiry it holds is more than a quarter of ExpiryTimeout
// behind the one due: a connection that reads many times a second
// updates its deadline's timer every 11 s instead of on every read, and
// an idle one heard from every 15 s once per heartbeat, as before, with
// a deadline that never passes while the peer beats (moving it only
// when it passed would cost a reader wake-up and a read per 45 s, more
// than the timer updates saved). A deadline that passes although bytes
// came since it was set is moved to when the expiry is due. Once TCP
// watches the connection (WatchTCP) there is no expiry: a deadline set
// before is cleared when it passes.
type expiryReader struct{ c *Conn }

func (r expiryReader) Read(p []byte) (int, error) {
	c := r.c
	for {
		watched := c.tcpWatched.Load()
		if due := c.heardAt + c.opts.ExpiryTimeout; !watched && due-c.armed > c.opts.ExpiryTimeout/4 {
			c.rearm(due)
		}
		n, err := c.sock.Read(p)
		if n > 0 {
			c.heardAt = time.Since(c.opened)
		}
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if c.tcpWatched.Load() {
			_ = c.nc.SetReadDeadline(time.Time{})
			continue
		}
		due := c.heardAt + c.opts.ExpiryTimeout
		if time.Since(c.opened) >= due {
			return 0, err // expired
		}
		c.rearm(due)
	}
}

// rearm sets the read deadline to due (time since opened). A failure
// means the connection is closed; the next read reports how (end of
// stream, closed by us, …).
func (c *Conn) rearm(due time.Duration) {
	c.armed = due
	_ = c.nc.SetReadDeadline(c.opened.Add(due))
}

func (c *Conn) readLoop() {
	defer c.inbox.close()
	d := NewDecoder(expiryReader{c})
	for {
		f, err := d.Decode()
		if err != nil {
			var perr *ProtocolError
			if errors.As(err, &perr) {
				if c.protocolError(perr) {
					return
				}
				continue
			}
			c.readFailed(err)
			return
		}
		if _, ok := f.(*HeartbeatFrame); ok {
			if c.opts.OnHeartbeat != nil {
				c.opts.OnHeartbeat()
			}
			continue
		}
		if id := f.Envelope().ID; id != "" && c.answer(id, f) {
			continue
		}
		if !c.inbox.put(f, c.done) {
			return
		}
	}
}

// answer hands f to the pending request with this id, if there is one.
func (c *Conn) answer(id string, f Frame) bool {
	c.mu.Lock()
	reply, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	if ok {
		reply <- f // buffered, and only ever sent once
	}
	return ok
}

func (c *Conn) readFailed(err error) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.closeWith(ReasonExpired, nil, nil)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.ErrClosedPipe):
		c.closeWith(ReasonPeerClosed, nil, nil)
	default:
		c.closeWith(c.ioFailure(err), err, nil)
	}
}

// ioFailure is the reason a read or write that failed with err closes the
// connection: expired when TCP watches it (WatchTCP) and its user timeout
// passed, which is this side's expiry then, else ReasonIO.
func (c *Conn) ioFailure(err error) CloseReason {
	if c.tcpWatched.Load() && errors.Is(err, syscall.ETIMEDOUT) {
		return ReasonExpired
	}
	return ReasonIO
}

// protocolError answers a bad record with an error frame and keeps the
// connection, except for a version mismatch, which is answered and then
// closed (AC-X.6). An error frame is never answered with an error frame.
// It reports whether the reader must stop.
func (c *Conn) protocolError(perr *ProtocolError) bool {
	c.log.Warn().Str("code", string(perr.Code)).Str("frameType", perr.FrameType).Msg(perr.Message)
	var reply []byte
	if perr.FrameType != TypeError {
		var err error
		if reply, err = AppendFrame(nil, perr.ErrorFrame()); err != nil {
			c.log.Error().Err(err).Msg("cannot encode error frame")
			reply = nil
		}
	}
	if perr.Code == CodeUnsupportedVersion {
		if reply == nil {
			c.closeWith(ReasonProtocol, perr, nil)
			return true
		}
		c.closeWith(ReasonProtocol, perr, reply)
		c.linger()
		return true
	}
	if reply != nil {
		buf := bufPool.Get().(*[]byte)
		*buf = append((*buf)[:0], reply...)
		select {
		case c.sendq <- buf:
		case <-c.done:
		}
	}
	return false
}

// linger reads and drops input for up to LingerTimeout after the final
// error frame, so that closing a socket with unread input does not turn
// into a reset that could destroy the error frame in flight.
func (c *Conn) linger() {
	defer c.nc.Close()
	if err := c.nc.SetReadDeadline(time.Now().Add(c.opts.LingerTimeout)); err != nil {
		return
	}
	var scratch [4096]byte
	for {
		if _, err := c.sock.Read(scratch[:]); err != nil {
			return
		}
	}
}

var heartbeatLine = []byte(`{"v":1,"type":"heartbeat"}` + "\n")

// heartbeatRecord is heartbeatLine without its LF (see Decoder.Decode).
var heartbeatRecord = heartbeatLine[:len(heartbeatLine)-1]

// maxBatch is how many queued bytes the writer joins into one write.
const maxBatch = 64 << 10

// batchPool holds the buffers writers join queued frames in: a writer
// takes one only while frames wait, so an idle connection holds none.
var batchPool = sync.Pool{New: func() any { b := make([]byte, 0, maxBatch); return &b }}

func (c *Conn) writeLoop() {
	for {
		// A due heartbeat goes before queued frames: liveness must not
		// depend on how much data is waiting.
		select {
		case <-c.beatDue:
			if !c.write(nil) {
				return
			}
		default:
		}
		select {
		case <-c.done:
			c.writeFinal()
			return
		case <-c.beatDue:
			if !c.write(nil) {
				return
			}
		case buf := <-c.sendq:
			c.unreserve(len(*buf))
			// One frame is written as it is; more are joined in a
			// batch buffer taken for this write only.
			out, batch := *buf, (*[]byte)(nil)
		more:
			for len(out) < maxBatch {
				select {
				case next := <-c.sendq:
					if batch == nil {
						batch = batchPool.Get().(*[]byte)
						*batch = append((*batch)[:0], *buf...)
						putBuf(buf)
						buf = nil
					}
					*batch = append(*batch, *next...)
					c.unreserve(len(*next))
					putBuf(next)
					out = *batch
				default:
					break more
				}
			}
			c.madeRoom()
			ok := c.write(out)
			if buf != nil {
				putBuf(buf)
			}
			if batch != nil && cap(*batch) <= 2*maxBatch {
				batchPool.Put(batch)
			}
			if !ok {
				return
			}
		}
	}
}

// write writes p, or a heartbeat when p is nil, after what is left of a
// heartbeat the heartbeat goroutine could only partly write.
func (c *Conn) write(p []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if p == nil && c.beatRest == nil && c.beatsOff.Load() {
		return true // handed over before StopHeartbeats
	}
	now := time.Now()
	c.sentAt.Store(int64(now.Sub(c.opened)))
	_ = c.nc.SetWriteDeadline(now.Add(c.opts.StallTimeout)) // as in expiryReader
	if rest := c.beatRest; rest != nil {
		c.beatRest = nil
		if !c.writeOut(rest) {
			return false
		}
		if p == nil {
			return true // that was the heartbeat
		}
	}
	if p == nil {
		p = heartbeatLine
	}
	return c.writeOut(p)
}

func (c *Conn) writeOut(p []byte) bool {
	if _, err := c.sock.Write(p); err != nil {
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.closeWith(ReasonStalled, nil, nil)
		case errors.Is(err, io.ErrClosedPipe):
			c.closeWith(ReasonPeerClosed, nil, nil)
		default:
			c.closeWith(c.ioFailure(err), err, nil)
		}
		return false
	}
	return true
}

// writeFinal writes the frame of a closing connection and shuts down the
// write side, so the peer reads the frame and then end of stream.
func (c *Conn) writeFinal() {
	if c.final == nil {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.nc.SetWriteDeadline(time.Now().Add(c.opts.StallTimeout)); err == nil {
		if c.beatRest != nil {
			_, _ = c.sock.Write(c.beatRest)
		}
		_, _ = c.sock.Write(c.final)
	}
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = c.nc.Close()
	}
}
