package pirpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Options configure a Client. The zero value is ready to use.
type Options struct {
	// Logger receives protocol anomalies (unparsable or overlong lines,
	// barriers that could not be sent). The zero value logs nothing.
	Logger zerolog.Logger
	// MaxLineBytes caps one stdout record (default DefaultMaxLineBytes).
	MaxLineBytes int
	// QueueBytes bounds the lines held for a slow Lines consumer (default
	// DefaultQueueBytes); see Lines for the policy.
	QueueBytes int
	// IDPrefix prefixes the ids the Client mints (default "pirpc-<n>-",
	// unique in the process). Raw commands written with WriteRaw must not
	// use ids with this prefix.
	IDPrefix string
	// DisableSettle turns the settle detector off: no get_state barriers,
	// no synthetic agent_settled lines.
	DisableSettle bool
	// RunWait is the settle detector's wait for a run after a compaction
	// (default DefaultRunWait).
	RunWait time.Duration
	// DiscardLines drops every line once the Client has used it (responses,
	// settle detection), for users that never read Lines.
	DiscardLines bool
}

// Line is one record of the worker's stdout as the Client delivers it, in
// stdout order, plus the settles the Client derived.
type Line struct {
	Record
	// Own is set on responses to calls made through this Client (its
	// get_state barriers among them). An agent forwarding a worker's output
	// usually leaves these out: nobody downstream asked for them.
	Own bool
	// Synthetic is set on the agent_settled lines the Client makes for a
	// pi that does not send them. Raw is then
	// {"type":"agent_settled","aborted":<bool>}, the newer pi's shape.
	Synthetic bool
	// Settled is set on the line at which the worker became idle after a
	// run: the synthetic agent_settled line, or a native agent_settled
	// event. Exactly one line per run has it.
	Settled *Settle
	// Duplicate marks a native agent_settled repeating a settle the Client
	// already reported with a synthetic line. Forward-only consumers (the
	// agent) drop it, so that each run settles once downstream.
	Duplicate bool
	// Shed counts the message_update and tool_execution_update lines
	// dropped just before this one because the consumer fell behind.
	Shed int
}

var clientSeq atomic.Uint64

type pendingCall struct {
	id      string
	typ     string
	seq     uint64
	barrier uint64 // settle barrier token, 0 for user calls
	ch      chan *Response
}

// Client speaks pi's RPC protocol over a worker's stdin and stdout.
//
// One goroutine reads stdout continuously (pi must never wait on us), parses
// every record, answers calls by id, runs the settle detector and queues
// the lines for Lines. Commands are serialised by one writer lock, one
// whole line per write. pi handles commands concurrently, so responses can
// come in any order; each call waits for the response with its own id.
type Client struct {
	w   io.Writer
	r   io.Reader
	log zerolog.Logger

	wmu  sync.Mutex
	wbuf []byte

	prefix string
	seq    atomic.Uint64

	mu      sync.Mutex
	pending map[string]*pendingCall
	settle  *SettleDetector // nil when disabled
	timer   *time.Timer
	closed  bool
	err     error

	q       *lineQueue
	lines   chan Line
	discard bool
	done    chan struct{}
	close1  sync.Once

	tooLong   atomic.Int64
	unparsed  atomic.Int64
	unmatched atomic.Int64
}

// NewClient starts a Client writing commands to w (the worker's stdin) and
// reading records from r (its stdout). The Client ends when r returns EOF
// or an error; see Done and Err.
func NewClient(w io.Writer, r io.Reader, opts Options) *Client {
	c := &Client{
		w:       w,
		r:       r,
		log:     opts.Logger,
		prefix:  opts.IDPrefix,
		pending: make(map[string]*pendingCall),
		q:       newLineQueue(opts.QueueBytes),
		lines:   make(chan Line),
		discard: opts.DiscardLines,
		done:    make(chan struct{}),
	}
	if c.prefix == "" {
		c.prefix = "pirpc-" + strconv.FormatUint(clientSeq.Add(1), 36) + "-"
	}
	if !opts.DisableSettle {
		c.settle = NewSettleDetector(opts.RunWait)
	}
	lr := NewLineReader(r, opts.MaxLineBytes)
	go c.readLoop(lr)
	go c.pump()
	return c
}

// Lines returns the worker's stdout records in order, with derived settles.
// The channel is closed after the stream ended and every queued line was
// delivered (or at once after Close).
//
// Read it continuously. When the consumer falls behind, message_update
// and tool_execution_update lines are shed once half of Options.QueueBytes
// is queued (Line.Shed counts them), and at the full cap the reader waits
// for the consumer — calls made meanwhile wait too.
func (c *Client) Lines() <-chan Line { return c.lines }

// Done is closed when the stream has ended and pending calls have failed.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the stream ended: nil for a clean EOF (or before the
// end), else the read error.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Counters reports protocol anomalies seen so far: overlong records
// skipped, lines that were not pi records, and responses that matched no
// call (answers to raw commands are not counted).
func (c *Client) Counters() (tooLong, unparsed, unmatched int64) {
	return c.tooLong.Load(), c.unparsed.Load(), c.unmatched.Load()
}

// CloseInput closes the worker's stdin if it can be closed. pi 0.73.1 then
// exits at once, even mid-run (without agent_end, and without killing a
// running tool): abort a busy worker first.
func (c *Client) CloseInput() error {
	if cl, ok := c.w.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// Close stops delivering lines, closes stdin and, if it can be closed,
// stdout. It does not wait; Done is closed once the reader has stopped.
func (c *Client) Close() error {
	var err error
	c.close1.Do(func() {
		c.q.abandon()
		err = c.CloseInput()
		if cl, ok := c.r.(io.Closer); ok {
			err = errors.Join(err, cl.Close())
		}
	})
	return err
}

// Call sends cmd with a fresh id and waits for its response. A response
// with success:false returns the response and a *CommandError (errors.Is
// ErrUnsupported when pi did not know the command). Commands pi never
// answers (ExtensionUIResponse) are sent without waiting and return a nil
// response.
func (c *Client) Call(ctx context.Context, cmd Command) (*Response, error) {
	if _, ok := cmd.(noResponse); ok {
		return nil, c.Send(cmd)
	}
	pc, err := c.register(cmd.CommandType())
	if err != nil {
		return nil, err
	}
	line, err := EncodeCommand(pc.id, cmd)
	if err == nil {
		err = c.write(line)
	}
	if err != nil {
		c.unregister(pc.id)
		return nil, err
	}
	select {
	case r, ok := <-pc.ch:
		if !ok {
			return nil, c.closedErr()
		}
		return r, r.Err()
	case <-ctx.Done():
		c.unregister(pc.id)
		return nil, fmt.Errorf("pirpc: %s: %w", cmd.CommandType(), ctx.Err())
	}
}

// Do calls cmd and decodes the response's data into a T.
func Do[T any](ctx context.Context, c *Client, cmd Command) (T, error) {
	var out T
	r, err := c.Call(ctx, cmd)
	if err != nil {
		return out, err
	}
	if r == nil {
		return out, nil
	}
	return out, r.Decode(&out)
}

// Send writes cmd without an id and does not wait. pi's response to it, if
// any, is delivered through Lines only.
func (c *Client) Send(cmd Command) error {
	line, err := EncodeCommand("", cmd)
	if err != nil {
		return err
	}
	return c.write(line)
}

// WriteRaw writes one command verbatim (for example one forwarded from a
// server). A trailing LF is optional; an embedded one is refused with
// ErrEmbeddedNewline. Its response is delivered through Lines.
func (c *Client) WriteRaw(command []byte) error {
	return c.write(command)
}

// Prompt sends a prompt and waits for pi to accept it (before agent_start).
func (c *Client) Prompt(ctx context.Context, message string) error {
	_, err := c.Call(ctx, Prompt{Message: message})
	return err
}

// GetState asks for the worker's state.
func (c *Client) GetState(ctx context.Context) (*State, error) {
	st, err := Do[State](ctx, c, GetState{})
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// Abort stops the current run; it returns after pi's agent_end.
func (c *Client) Abort(ctx context.Context) error {
	_, err := c.Call(ctx, Abort{})
	return err
}

func (c *Client) closedErr() error {
	if err := c.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return ErrClosed
}

func (c *Client) newPending(typ string, barrier uint64) *pendingCall {
	n := c.seq.Add(1)
	return &pendingCall{id: c.prefix + strconv.FormatUint(n, 10), typ: typ, seq: n, barrier: barrier, ch: make(chan *Response, 1)}
}

func (c *Client) register(typ string) (*pendingCall, error) {
	pc := c.newPending(typ, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, c.closedErrLocked()
	}
	c.pending[pc.id] = pc
	return pc, nil
}

func (c *Client) closedErrLocked() error {
	if c.err != nil {
		return fmt.Errorf("%w: %w", ErrClosed, c.err)
	}
	return ErrClosed
}

func (c *Client) unregister(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) write(record []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	buf, err := appendLine(c.wbuf[:0], record)
	if err != nil {
		return err
	}
	if cap(buf) <= 64<<10 {
		c.wbuf = buf
	}
	if _, err := c.w.Write(buf); err != nil {
		return fmt.Errorf("pirpc: writing command: %w", err)
	}
	return nil
}

// readLoop is the only reader of stdout.
func (c *Client) readLoop(lr *LineReader) {
	var readErr error
	for {
		raw, err := lr.Next()
		if err != nil {
			var tl *LineTooLongError
			if errors.As(err, &tl) && errors.Unwrap(err) == nil {
				c.tooLong.Add(1)
				c.log.Warn().Int64("bytes", tl.Bytes).Int("max", tl.Max).Msg("pirpc: skipped overlong worker record")
				continue
			}
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		rec, err := ParseRecord(raw)
		if err != nil {
			c.unparsed.Add(1)
			c.log.Warn().Err(err).Msg("pirpc: dropped worker line")
			continue
		}
		for _, l := range c.handle(rec) {
			if !c.discard {
				c.q.push(l)
			}
		}
	}
	c.finish(readErr)
}

// handle matches responses, feeds the settle detector and returns the
// lines to deliver, in order.
func (c *Client) handle(rec Record) []Line {
	line := Line{Record: rec}
	var act SettleAction
	c.mu.Lock()
	if r := rec.Response; r != nil {
		pc := c.matchLocked(r)
		if pc != nil {
			line.Own = true
			delete(c.pending, pc.id)
			pc.ch <- r
			if pc.barrier != 0 && c.settle != nil {
				var st BarrierState
				if r.Success {
					var s State
					if r.Decode(&s) == nil {
						st = BarrierState{IsStreaming: s.IsStreaming, PendingMessageCount: s.PendingMessageCount}
					}
				}
				act = c.settle.OnBarrier(pc.barrier, st)
			}
		}
		if r.Command == "prompt" && len(r.Data) > 0 && c.settle != nil {
			// 0.73.1's prompt response never has data; newer releases
			// (which send agent_settled themselves) add a disposition.
			c.settle.SetNative()
		}
	} else if c.settle != nil {
		act = c.settle.OnEvent(rec.Event)
		if rec.Event.Type == EventAgentSettled {
			line.Settled = act.Settled
			line.Duplicate = act.Duplicate
			act.Settled = nil
		}
	}
	c.performLocked(act)
	c.mu.Unlock()

	out := []Line{line}
	if act.Settled != nil {
		out = append(out, syntheticSettled(act.Settled))
	}
	return out
}

// matchLocked finds the call a response answers. pi drops the id of an
// unknown command's response; such a response is given to the oldest
// pending call of that command type.
func (c *Client) matchLocked(r *Response) *pendingCall {
	if r.ID != "" {
		if pc, ok := c.pending[r.ID]; ok {
			return pc
		}
		if len(r.ID) > len(c.prefix) && r.ID[:len(c.prefix)] == c.prefix {
			c.unmatched.Add(1) // a call that gave up (context) or a stray
		}
		return nil
	}
	if r.Success || !(&CommandError{Message: r.Error}).Unsupported() {
		return nil
	}
	var oldest *pendingCall
	for _, pc := range c.pending {
		if pc.typ == r.Command && (oldest == nil || pc.seq < oldest.seq) {
			oldest = pc
		}
	}
	return oldest
}

// performLocked carries out a settle action: send a barrier, arm a wait.
func (c *Client) performLocked(act SettleAction) {
	if act.Barrier != 0 {
		pc := c.newPending("get_state", act.Barrier)
		c.pending[pc.id] = pc
		line, _ := EncodeCommand(pc.id, GetState{})
		// Written from another goroutine: the reader must not wait on
		// stdin while holding the lock.
		go func() {
			if err := c.write(line); err != nil {
				c.log.Debug().Err(err).Msg("pirpc: settle barrier not sent")
			}
		}()
	}
	if act.Wait != 0 {
		if c.timer != nil {
			c.timer.Stop()
		}
		token := act.Wait
		c.timer = time.AfterFunc(act.WaitFor, func() { c.onWaitExpired(token) })
	}
}

func (c *Client) onWaitExpired(token uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.settle == nil {
		return
	}
	c.performLocked(c.settle.OnTimeout(token))
}

func syntheticSettled(s *Settle) Line {
	raw, _ := json.Marshal(struct {
		Type    string `json:"type"`
		Aborted bool   `json:"aborted"`
	}{string(EventAgentSettled), s.Aborted})
	return Line{
		Record:    Record{Raw: raw, Event: &Event{Type: EventAgentSettled, Aborted: s.Aborted}},
		Synthetic: true,
		Settled:   s,
	}
}

// finish fails pending calls and closes the line queue.
func (c *Client) finish(err error) {
	c.mu.Lock()
	c.closed = true
	c.err = err
	for id, pc := range c.pending {
		close(pc.ch)
		delete(c.pending, id)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.q.close()
	close(c.done)
}

// pump moves lines from the queue to the Lines channel.
func (c *Client) pump() {
	defer close(c.lines)
	for {
		l, ok := c.q.pop()
		if !ok {
			return
		}
		select {
		case c.lines <- l:
		case <-c.q.gone:
			return
		}
	}
}
