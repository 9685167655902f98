package shim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// NewToken returns a fresh secret for StartConfig.Shim.Token (128 bits from
// crypto/rand). The agent keeps it with the instance to re-attach later.
func NewToken() string { return rand.Text() }

// StartConfig says how to launch a shim.
type StartConfig struct {
	// Executable is the binary that runs the shim, normally the agent's own
	// (os.Executable()), and Args select its shim entry point, e.g.
	// []string{"shim"} for `pifleet-agent shim`.
	Executable string
	Args       []string
	// LogPath receives the shim's stderr (its JSON log), appended; it
	// outlives the agent with the shim. "" discards it.
	LogPath string
	// Shim is what the shim runs and how. Its Logger, Now and OnReady
	// cannot cross a process boundary and are ignored.
	Shim Config
	// Logger is the Client's logger (default zerolog.Nop()).
	Logger zerolog.Logger
}

// AttachConfig says which shim to attach to and from where to resume.
type AttachConfig struct {
	Socket     string
	InstanceID string
	Token      string
	// ResumeFrom is the first seq to deliver. 0 resumes after the last seq
	// any agent acknowledged. N > 0 also acknowledges everything before N.
	ResumeFrom uint64
	// Logger is the Client's logger (default zerolog.Nop()).
	Logger zerolog.Logger
}

// StopOptions shape Client.Stop.
type StopOptions struct {
	// CloseStdin closes the worker's stdin first (after the writes already
	// sent); pi exits on EOF. To abort a running pi first, Write
	// {"type":"abort"} before calling Stop.
	CloseStdin bool
	// Grace is waited before SIGTERM and again before SIGKILL.
	Grace time.Duration
}

// Client is an agent's attachment to one shim. It delivers the worker's
// stdout as Events in seq order and carries requests to the shim. Only one
// Client is attached to a shim at a time: a newer attachment ends this one
// with ErrReplaced.
//
// The shim sends at most its Window of bytes beyond the last Ack, so an
// agent must Ack what it has handled (Ack is cheap: one small write, no
// reply). Acknowledged lines are discarded by the shim and are not
// delivered again after a re-attach; unacknowledged ones are.
//
// All methods are safe for concurrent use.
type Client struct {
	conn     net.Conn
	fr       *frameReader
	out      *frameWriter
	log      zerolog.Logger
	attached Status
	maxFrame int
	window   int
	shim     *shimProcess // nil unless Start launched the shim

	stdinMu sync.Mutex // one Write or CloseStdin at a time, until answered
	sendMu  sync.Mutex // keeps one message's frames together (Write, Post)

	reqMu   sync.Mutex
	nextReq uint32
	pending map[uint32]chan reply
	endErr  error // set once the connection ended; guarded by reqMu

	acked   atomic.Uint64 // highest seq acknowledged
	exitSeq atomic.Uint64 // seq of the exit record, once received

	qmu   sync.Mutex
	queue []Event
	qKick chan struct{}

	events     chan Event
	closing    chan struct{}
	closeOnce  sync.Once
	done       chan struct{} // closed when the connection ended
	readerDone chan struct{} // closed when readLoop has returned
	clean      bool          // ended by Close or by the shim finishing; set before done
	wg         sync.WaitGroup
}

// shimProcess is a shim this process launched and reaps.
type shimProcess struct {
	pid    int
	exited chan struct{} // closed once reaped
}

// eventsBuffer lets the pump run ahead of the consumer by this many events
// (a goroutine switch saved per event); the shim's window still bounds
// what the Client holds in all.
const eventsBuffer = 256

type reply struct {
	msg responseMsg
	err error
}

// errFinished ends a connection the shim closed after the exit was
// acknowledged.
var errFinished = fmt.Errorf("%w: the shim finished after its exit was acknowledged", ErrExited)

// Attach connects to the shim on cfg.Socket, proves it is the right one
// (instance id and token) and resumes the stream. It returns an error
// matching ErrNoShim when nothing serves the socket (the worker is lost),
// ErrWrongShim when a shim there refuses the instance id or token, and
// ErrProtocol for a bad ResumeFrom or a peer that is not a shim.
func Attach(ctx context.Context, cfg AttachConfig) (*Client, error) {
	if err := checkIdentity(cfg.InstanceID, cfg.Token, cfg.Socket); err != nil {
		return nil, err
	}
	conn, err := dialSocket(ctx, cfg.Socket)
	if err != nil {
		if isNoShim(err) {
			return nil, fmt.Errorf("%w: %s: %w", ErrNoShim, cfg.Socket, err)
		}
		return nil, fmt.Errorf("shim: connect to %s: %w", cfg.Socket, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	// Read and written raw, as the shim's side is: the agent reads every
	// line of a streamed answer from here.
	rw := relayIO(conn)
	welcome, fr, err := handshake(rw, cfg)
	if !stop() {
		err = ctx.Err()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(time.Time{})
	c := &Client{
		conn:     conn,
		fr:       fr,
		out:      newFrameWriter(rw),
		log:      cfg.Logger,
		attached: welcome.Status,
		maxFrame: maxLineFrame(welcome.MaxLine),
		window:   welcome.Window,
		pending:  make(map[uint32]chan reply),
		qKick:    make(chan struct{}, 1),
		events:   make(chan Event, eventsBuffer),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),

		readerDone: make(chan struct{}),
	}
	c.wg.Add(2)
	go c.readLoop()
	go c.pump()
	return c, nil
}

func handshake(conn io.ReadWriter, cfg AttachConfig) (welcomeMsg, *frameReader, error) {
	hello := helloMsg{V: protocolVersion, InstanceID: cfg.InstanceID, Token: cfg.Token, ResumeFrom: cfg.ResumeFrom}
	if err := newFrameWriter(conn).writeJSON(frameHello, nil, hello); err != nil {
		return welcomeMsg{}, nil, fmt.Errorf("%w: %s: sending hello: %w", ErrNoShim, cfg.Socket, err)
	}
	fr := newFrameReader(conn)
	t, body, err := fr.next(maxControlFrame)
	if err != nil {
		if errors.Is(err, ErrProtocol) {
			return welcomeMsg{}, nil, err
		}
		return welcomeMsg{}, nil, fmt.Errorf("%w: %s: closed during the handshake: %w", ErrNoShim, cfg.Socket, err)
	}
	f, err := decodeShimFrame(t, body)
	switch {
	case err != nil:
		return welcomeMsg{}, nil, err
	case t == frameRefused:
		return welcomeMsg{}, nil, f.refused
	case t != frameWelcome:
		return welcomeMsg{}, nil, &FrameError{Type: t, Reason: "expected welcome or refused"}
	case f.welcome.V != protocolVersion:
		return welcomeMsg{}, nil, &FrameError{Type: t, Reason: fmt.Sprintf("protocol version %d", f.welcome.V)}
	}
	return *f.welcome, fr, nil
}

// Attached is the shim's status at the moment of the attach.
func (c *Client) Attached() Status { return c.attached }

// Events delivers the stream in seq order: lines, gaps, and finally the
// exit. It is closed when the connection ends (see Err) or the Client is
// closed; events received before the end are delivered first.
func (c *Client) Events() <-chan Event { return c.events }

// Window is how many bytes of stdout the shim sends beyond the last Ack
// before it waits for one: an agent that holds its acks back must send
// one well before that.
func (c *Client) Window() int { return c.window }

// Done is closed when the connection to the shim has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the connection ended: nil while it is open, after Close, and
// after the shim finished because the exit was acknowledged; otherwise an
// error matching ErrReplaced, ErrDisconnected or ErrProtocol.
func (c *Client) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	if c.clean {
		return nil
	}
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	return c.endErr
}

// ShimExited is closed once the shim process that Start launched has ended
// and been reaped. It is nil for a Client from Attach: that shim is not this
// process's child.
func (c *Client) ShimExited() <-chan struct{} {
	if c.shim == nil {
		return nil
	}
	return c.shim.exited
}

// Write sends p to the worker's stdin, after every earlier Write. A Write
// is atomic: the worker gets all of p or none of it (p is sent in chunks
// that the shim assembles first), so a message is never cut by a cancelled
// ctx or a dropped connection. It returns once the shim has written p to
// the pipe (a worker that does not read its stdin makes Write wait), or
// with ErrStdinClosed, ErrExited or ErrBusy. When ctx ends first, p may
// still be written later, whole and in order. p is at most MaxWrite bytes.
func (c *Client) Write(ctx context.Context, p []byte) error {
	if len(p) > MaxWrite {
		return fmt.Errorf("%w: %d bytes exceed MaxWrite", ErrTooLarge, len(p))
	}
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	pend, err := c.sendMessage(p)
	if err != nil {
		return err
	}
	return pend.Wait(ctx)
}

// sendMessage sends p as write frames.
func (c *Client) sendMessage(p []byte) (*Pending, error) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	for len(p) > writeChunk {
		if err := c.out.write(frameWrite, append(u32(0), writeMore), p[:writeChunk], false); err != nil {
			return nil, c.connError(err)
		}
		p = p[writeChunk:]
	}
	return c.send(frameWrite, p, 0)
}

// Post sends p to the worker's stdin like Write, without waiting for the
// shim's answer: p is on its way to the shim when Post returns, after
// every earlier Write and Post, and the Pending gives the answer. A caller
// that must not wait on the worker's stdin (a read loop that issues
// commands of its own) can send in order and at once without a goroutine
// in between. Post waits only for the socket to take p's frames.
func (c *Client) Post(p []byte) (*Pending, error) {
	if len(p) > MaxWrite {
		return nil, fmt.Errorf("%w: %d bytes exceed MaxWrite", ErrTooLarge, len(p))
	}
	return c.sendMessage(p)
}

// CloseStdin closes the worker's stdin after every earlier Write.
func (c *Client) CloseStdin(ctx context.Context) error {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	c.sendMu.Lock()
	pend, err := c.send(frameCloseStdin, nil)
	c.sendMu.Unlock()
	if err != nil {
		return err
	}
	return pend.Wait(ctx)
}

// Signal sends sig to the worker's whole process group (so a tool the
// worker runs gets it too). The shim is the worker's parent and has not
// reaped it, so the signal cannot reach a reused pid; after the exit it
// fails with ErrExited.
func (c *Client) Signal(ctx context.Context, sig Signal) error {
	if _, ok := requestSignals[sig]; !ok {
		return fmt.Errorf("%w: %q", ErrBadSignal, sig)
	}
	body, _ := json.Marshal(signalMsg{Signal: sig})
	_, err := c.request(ctx, frameSignal, body)
	return err
}

// Stop has the shim end the worker on its own: close stdin if asked, wait
// Grace, SIGTERM the group, wait Grace, SIGKILL it; the exit then arrives
// as an EventExit. The procedure runs in the shim, so it completes even if
// the agent dies meanwhile. A second Stop does not restart it.
func (c *Client) Stop(ctx context.Context, opts StopOptions) error {
	body, _ := json.Marshal(stopMsg{CloseStdin: opts.CloseStdin, GraceMs: opts.Grace.Milliseconds()})
	_, err := c.request(ctx, frameStop, body)
	return err
}

// Status asks the shim for its current status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	msg, err := c.request(ctx, frameStatus, nil)
	if err != nil {
		return Status{}, err
	}
	if msg.Status == nil {
		return Status{}, &FrameError{Type: frameResponse, Reason: "status response without a status"}
	}
	return *msg.Status, nil
}

// Ack tells the shim that every record through seq has been handled: the
// shim discards them, opens its window, and, when seq is the exit's,
// finishes (Events then closes with Err() == nil). Acks are ordered with
// this Client's requests: a Status after an Ack reflects it.
func (c *Client) Ack(seq uint64) error {
	for {
		cur := c.acked.Load()
		if seq <= cur {
			return nil // said already: acks are cumulative
		}
		if c.acked.CompareAndSwap(cur, seq) {
			break
		}
	}
	if err := c.out.write(frameAck, u64(seq), nil, true); err != nil {
		return c.connError(err)
	}
	return nil
}

// Detach is the graceful Close: it first makes sure the shim has applied
// every Ack sent (a Status round trip; requests and acks are ordered), so
// that the next attachment resumes exactly after them, then closes.
func (c *Client) Detach(ctx context.Context) error {
	_, err := c.Status(ctx)
	c.Close()
	return err
}

// Close detaches from the shim at once, without stopping the worker: the
// shim keeps reading its output for the next attachment. Acks written just
// before may reach the shim after a newer attachment started, which then
// gets those lines again (use Detach to avoid that). Close waits for the
// Client's goroutines and always returns nil.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.conn.Close()
	})
	c.wg.Wait()
	return nil
}

// request sends a request frame (req id, then prefix, then data) and
// waits for its response.
func (c *Client) request(ctx context.Context, t frameType, data []byte, prefix ...byte) (responseMsg, error) {
	p, err := c.send(t, data, prefix...)
	if err != nil {
		return responseMsg{}, err
	}
	return p.wait(ctx)
}

// send sends a request frame (req id, then prefix, then data) and returns
// its response to come.
func (c *Client) send(t frameType, data []byte, prefix ...byte) (*Pending, error) {
	select {
	case <-c.closing:
		return nil, ErrClosed
	default:
	}
	p := &Pending{c: c, ch: make(chan reply, 1)}
	c.reqMu.Lock()
	if c.endErr != nil {
		err := c.endErr
		c.reqMu.Unlock()
		return nil, err
	}
	c.nextReq++
	p.id = c.nextReq
	c.pending[p.id] = p.ch
	c.reqMu.Unlock()
	if err := c.out.write(t, append(u32(p.id), prefix...), data, true); err != nil {
		p.forget()
		return nil, c.connError(err)
	}
	return p, nil
}

// Pending is the shim's answer to come to a request that was sent (see
// Post).
type Pending struct {
	c  *Client
	id uint32
	ch chan reply
}

// Wait waits for the answer: nil when the request succeeded, else what
// Write would have returned. When ctx ends first it returns ctx's error
// and the answer is forgotten.
func (p *Pending) Wait(ctx context.Context) error {
	_, err := p.wait(ctx)
	return err
}

func (p *Pending) wait(ctx context.Context) (responseMsg, error) {
	select {
	case r := <-p.ch:
		if r.err != nil {
			return responseMsg{}, r.err
		}
		if r.msg.Error != nil {
			return r.msg, r.msg.Error
		}
		return r.msg, nil
	case <-ctx.Done():
		p.forget()
		return responseMsg{}, ctx.Err()
	}
}

func (p *Pending) forget() {
	p.c.reqMu.Lock()
	delete(p.c.pending, p.id)
	p.c.reqMu.Unlock()
}

// connError is the error of an operation that failed on the connection.
func (c *Client) connError(err error) error {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	if c.endErr != nil {
		return c.endErr
	}
	return fmt.Errorf("%w: %w", ErrDisconnected, err)
}

func (c *Client) readLoop() {
	defer c.wg.Done()
	defer close(c.readerDone)
	for {
		t, body, err := c.fr.next(c.maxFrame)
		if err != nil {
			c.end(err)
			return
		}
		f, err := decodeShimFrame(t, body)
		if err != nil {
			c.end(err)
			return
		}
		switch t {
		case frameLine:
			c.push(Event{Kind: EventLine, Seq: f.seq, Data: f.data})
		case frameOverlong:
			c.push(Event{Kind: EventLine, Seq: f.seq, Overlong: f.overlong})
		case frameGap:
			c.log.Warn().Uint64("from", f.gap.From).Uint64("to", f.gap.To).Msg("shim lost stdout lines")
			gap := f.gap // &f.gap would move every frame to the heap
			c.push(Event{Kind: EventGap, Gap: &gap})
		case frameExit:
			c.exitSeq.Store(f.seq)
			c.push(Event{Kind: EventExit, Seq: f.seq, Exit: f.exit})
		case frameResponse:
			c.reqMu.Lock()
			ch := c.pending[f.req]
			delete(c.pending, f.req)
			c.reqMu.Unlock()
			if ch != nil {
				ch <- reply{msg: *f.response}
			}
		case frameReplaced:
			c.end(ErrReplaced)
			return
		default:
			c.end(&FrameError{Type: t, Reason: "unexpected after the handshake"})
			return
		}
	}
}

// end records why the connection ended and fails pending requests.
func (c *Client) end(cause error) {
	var err error
	clean := false
	select {
	case <-c.closing:
		err, clean = ErrClosed, true
	default:
		exit := c.exitSeq.Load()
		switch {
		case errors.Is(cause, io.EOF) && exit != 0 && c.acked.Load() >= exit:
			err, clean = errFinished, true
		case errors.Is(cause, ErrReplaced) || errors.Is(cause, ErrProtocol):
			err = cause
		default:
			err = fmt.Errorf("%w: %w", ErrDisconnected, cause)
		}
	}
	c.conn.Close()
	c.reqMu.Lock()
	c.endErr = err
	pending := c.pending
	c.pending = nil
	c.reqMu.Unlock()
	for _, ch := range pending {
		ch <- reply{err: err}
	}
	if !clean {
		c.log.Warn().Err(err).Msg("shim connection ended")
	}
	c.clean = clean
	close(c.done)
}

// push hands an event to the consumer: straight into the Events buffer
// when nothing is queued ahead of it, else behind the queue that the pump
// drains. It never blocks the reader (so responses keep flowing while the
// consumer is busy); the shim's window bounds the queue.
func (c *Client) push(ev Event) {
	c.qmu.Lock()
	if len(c.queue) == 0 {
		select {
		case c.events <- ev:
			c.qmu.Unlock()
			return
		default:
		}
	}
	c.queue = append(c.queue, ev)
	c.qmu.Unlock()
	select {
	case c.qKick <- struct{}{}:
	default:
	}
}

// pump moves queued events into Events. An event leaves the queue only once
// sent, so that push, seeing the queue empty, cannot overtake it. Events is
// closed once the connection ended and the queue is empty, or at once on
// Close, but only after the reader (the other sender) has stopped.
func (c *Client) pump() {
	defer c.wg.Done()
	defer func() {
		<-c.readerDone
		close(c.events)
	}()
	for {
		// Read done before the queue: every push happened before end.
		ended := false
		select {
		case <-c.done:
			ended = true
		default:
		}
		c.qmu.Lock()
		if len(c.queue) == 0 {
			c.qmu.Unlock()
			if ended {
				return
			}
			select {
			case <-c.qKick:
			case <-c.done:
			case <-c.closing:
				return
			}
			continue
		}
		ev := c.queue[0]
		c.qmu.Unlock()
		select {
		case c.events <- ev:
		case <-c.closing:
			return
		}
		c.qmu.Lock()
		c.queue[0] = Event{}
		c.queue = c.queue[1:]
		c.qmu.Unlock()
	}
}
