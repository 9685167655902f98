package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// failsafe bounds waits in real-network tests; reaching it is a failure,
// never a way to wait for something.
const failsafe = 10 * time.Second

// tcpPair returns the two ends of a real loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// peer is the raw far end of a connection under test: it reads and
// writes frames itself, with no Conn of its own.
type peer struct {
	t   testing.TB
	nc  net.Conn
	dec *Decoder
}

func newPeer(t testing.TB, nc net.Conn) *peer {
	return &peer{t: t, nc: nc, dec: NewDecoder(nc)}
}

func (p *peer) send(f Frame) {
	p.t.Helper()
	if _, err := p.nc.Write(mustMarshal(p.t, f)); err != nil {
		p.t.Fatalf("peer write: %v", err)
	}
}

func (p *peer) sendRaw(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.nc, s); err != nil {
		p.t.Fatalf("peer write: %v", err)
	}
}

// next returns the next frame that is not a heartbeat.
func (p *peer) next() Frame {
	p.t.Helper()
	for {
		f, err := p.dec.Decode()
		if err != nil {
			p.t.Fatalf("peer decode: %v", err)
		}
		if _, hb := f.(*HeartbeatFrame); !hb {
			return f
		}
	}
}

func waitDone(t *testing.T, c *Conn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(failsafe):
		t.Fatal("connection did not close")
	}
}

func wantReason(t *testing.T, c *Conn, want CloseReason) {
	t.Helper()
	err := c.Err()
	if !errors.Is(err, ErrClosed) || !errors.Is(err, want) {
		t.Fatalf("Err() = %v, want closed with reason %s", err, want)
	}
}

func TestConnSetsNoDelayOnTCP(t *testing.T) {
	client, _ := tcpPair(t)
	client.(*net.TCPConn).SetNoDelay(false)
	c := NewConn(client, Options{})
	defer c.Close()
	if !noDelay(t, client.(*net.TCPConn)) {
		t.Error("TCP_NODELAY is off")
	}
}

func TestConnRequestResponseOverTCP(t *testing.T) {
	client, server := tcpPair(t)
	ids := 0
	c := NewConn(client, Options{NewID: func() string { ids++; return "r-" + strconv.Itoa(ids) }})
	defer c.Close()
	p := newPeer(t, server)
	go func() {
		// The agent: answer list with instances, stop with an error.
		for {
			f, err := p.dec.Decode()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *ListFrame:
				p.send(&InstancesFrame{Header: Header{ID: f.ID}, Instances: []InstanceInfo{{InstanceID: "i-1", Cwd: "/", State: InstanceRunning}}})
			case *StopFrame:
				p.send(&ErrorFrame{Header: Header{ID: f.ID}, Code: "unknown_instance", Message: "no instance " + f.InstanceID})
			}
		}
	}()

	got, err := c.Request(context.Background(), &ListFrame{})
	if err != nil {
		t.Fatal(err)
	}
	want := &InstancesFrame{Header: Header{ID: "r-1"}, Instances: []InstanceInfo{{InstanceID: "i-1", Cwd: "/", State: InstanceRunning}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("response (-want +got):\n%s", d)
	}

	_, err = c.Request(context.Background(), &StopFrame{InstanceID: "i-9"})
	var remote *RemoteError
	if !errors.As(err, &remote) || remote.Code != "unknown_instance" {
		t.Errorf("got %v, want RemoteError unknown_instance", err)
	}
}

func TestConnRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := NewConn(a, Options{ExpiryTimeout: time.Hour})
		defer c.Close()
		go io.Copy(io.Discard, b) // the peer reads and never answers

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Request(ctx, &ListFrame{})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("waited %v of virtual time, want the context's 5s", waited)
		}

		// Without a deadline, RequestTimeout (60 s) applies.
		start = time.Now()
		if _, err := c.Request(context.Background(), &ListFrame{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		if waited := time.Since(start); waited != DefaultRequestTimeout {
			t.Errorf("waited %v, want %v", waited, DefaultRequestTimeout)
		}
		if c.Err() != nil {
			t.Errorf("a timed-out request closed the connection: %v", c.Err())
		}
	})
}

func TestConnPendingRequestFailsWhenConnectionCloses(t *testing.T) {
	client, server := tcpPair(t)
	c := NewConn(client, Options{})
	p := newPeer(t, server)
	result := make(chan error, 1)
	go func() {
		_, err := c.Request(context.Background(), &ListFrame{})
		result <- err
	}()
	p.next() // the request is on the wire: it is pending
	server.Close()
	select {
	case err := <-result:
		if !errors.Is(err, ErrClosed) || !errors.Is(err, ReasonPeerClosed) {
			t.Errorf("got %v, want closed by peer", err)
		}
	case <-time.After(failsafe):
		t.Fatal("the pending request did not fail when the connection closed")
	}
	wantReason(t, c, ReasonPeerClosed)
}

func TestConnOrderedDeliveryBothWays(t *testing.T) {
	client, server := tcpPair(t)
	const n = 5000
	got := make(chan Frame, n)
	c := NewConn(client, Options{Handler: func(f Frame) { got <- f }})
	defer c.Close()
	p := newPeer(t, server)

	go func() {
		w := bufio.NewWriter(server)
		for i := range n {
			b, _ := MarshalFrame(&EventFrame{InstanceID: "i", Event: json.RawMessage(strconv.Itoa(i))})
			w.Write(b)
		}
		w.Flush()
	}()
	for i := range n {
		select {
		case f := <-got:
			if ev := string(f.(*EventFrame).Event); ev != strconv.Itoa(i) {
				t.Fatalf("frame %d carries event %s: out of order", i, ev)
			}
		case <-time.After(failsafe):
			t.Fatalf("only %d of %d frames delivered", i, n)
		}
	}

	go func() {
		for i := range n {
			if err := c.Send(context.Background(), &EventFrame{InstanceID: "i", Event: json.RawMessage(strconv.Itoa(i))}); err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
		}
	}()
	for i := range n {
		if ev := string(p.next().(*EventFrame).Event); ev != strconv.Itoa(i) {
			t.Fatalf("peer got event %s as frame %d: out of order", ev, i)
		}
	}
}

func TestConnFramesBeforeHandlerAreQueued(t *testing.T) {
	client, server := tcpPair(t)
	c := NewConn(client, Options{})
	defer c.Close()
	p := newPeer(t, server)
	p.send(&HelloFrame{Machine: "agent-1", Role: RoleAgent, PackageVersion: "0.0.1", Platform: "linux"})
	for i := range 3 {
		p.send(&EventFrame{InstanceID: "i", Event: json.RawMessage(strconv.Itoa(i))})
	}

	// A handshake step reads the hello before any handler exists.
	ctx, cancel := context.WithTimeout(context.Background(), failsafe)
	defer cancel()
	f, err := c.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := f.(*HelloFrame); !ok || h.Machine != "agent-1" {
		t.Fatalf("Receive = %#v, want the hello", f)
	}
	// A request answered meanwhile is not held up behind the queue.
	go func() {
		req := p.next()
		p.send(&InstancesFrame{Header: Header{ID: req.Envelope().ID}})
	}()
	if _, err := c.Request(ctx, &ListFrame{}); err != nil {
		t.Fatalf("request while frames are queued: %v", err)
	}

	got := make(chan Frame, 3)
	c.SetHandler(func(f Frame) { got <- f })
	for i := range 3 {
		select {
		case f := <-got:
			if ev := string(f.(*EventFrame).Event); ev != strconv.Itoa(i) {
				t.Fatalf("queued frame %d is event %s", i, ev)
			}
		case <-time.After(failsafe):
			t.Fatal("queued frames were not delivered")
		}
	}
	if _, err := c.Receive(ctx); !errors.Is(err, ErrHandlerSet) {
		t.Errorf("Receive with a handler set: %v, want ErrHandlerSet", err)
	}
}

func TestConnCloseIsIdempotent(t *testing.T) {
	client, server := tcpPair(t)
	c := NewConn(client, Options{})
	if c.Err() != nil {
		t.Fatalf("Err() on an open connection = %v", c.Err())
	}
	for range 3 {
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	waitDone(t, c)
	wantReason(t, c, ReasonClosed)
	if err := c.Send(context.Background(), &ListFrame{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if err := c.TrySend(&ListFrame{}); !errors.Is(err, ErrClosed) {
		t.Errorf("TrySend after Close: %v", err)
	}
	if _, err := c.Request(context.Background(), &ListFrame{}); !errors.Is(err, ReasonClosed) {
		t.Errorf("Request after Close: %v", err)
	}
	// The peer sees the end of the stream.
	server.SetReadDeadline(time.Now().Add(failsafe))
	if _, err := io.ReadAll(server); err != nil {
		t.Errorf("peer read after close: %v", err)
	}
}

// AC-X.6: a frame of another protocol version is answered with an error
// frame, then the connection closes cleanly.
func TestConnVersion2IsAnsweredThenClosed(t *testing.T) {
	client, server := tcpPair(t)
	c := NewConn(client, Options{})
	p := newPeer(t, server)
	p.sendRaw(`{"v":2,"type":"heartbeat"}` + "\n")

	f := p.next()
	e, ok := f.(*ErrorFrame)
	if !ok || e.Code != string(CodeUnsupportedVersion) || e.ID != "" {
		t.Fatalf("peer got %#v, want an id-less unsupported_version error frame", f)
	}
	server.SetReadDeadline(time.Now().Add(failsafe))
	if _, err := p.dec.Decode(); err != io.EOF {
		t.Fatalf("after the error frame the peer read %v, want a clean io.EOF", err)
	}
	waitDone(t, c)
	wantReason(t, c, ReasonProtocol)
	if !errors.Is(c.Err(), CodeUnsupportedVersion) {
		t.Errorf("Err() = %v does not carry the protocol error", c.Err())
	}
}

func TestConnProtocolErrorsAreAnsweredAndConnectionStays(t *testing.T) {
	client, server := tcpPair(t)
	got := make(chan Frame, 1)
	c := NewConn(client, Options{Handler: func(f Frame) { got <- f }})
	defer c.Close()
	p := newPeer(t, server)

	bad := []struct {
		rec  string
		code ErrorCode
	}{
		{"not json", CodeInvalidJSON},
		{`[1]`, CodeNotAnObject},
		{`{"v":1,"type":"teleport"}`, CodeUnknownFrameType},
		{`{"v":1,"type":"spawn","cwd":"/"}`, CodeSchemaViolation},
	}
	for _, b := range bad {
		p.sendRaw(b.rec + "\n")
		e, ok := p.next().(*ErrorFrame)
		if !ok || e.Code != string(b.code) {
			t.Fatalf("%q answered with %#v, want error %s", b.rec, e, b.code)
		}
	}
	p.send(&EventFrame{InstanceID: "i", Event: json.RawMessage(`{}`)})
	select {
	case f := <-got:
		if _, ok := f.(*EventFrame); !ok {
			t.Fatalf("handler got %T", f)
		}
	case <-time.After(failsafe):
		t.Fatal("the connection did not stay usable after protocol errors")
	}
	if c.Err() != nil {
		t.Fatalf("connection closed: %v", c.Err())
	}
}

// An error frame is never answered with an error frame, even a malformed
// one.
func TestConnNeverAnswersAnErrorFrame(t *testing.T) {
	client, server := tcpPair(t)
	got := make(chan Frame, 2)
	c := NewConn(client, Options{Handler: func(f Frame) { got <- f }})
	defer c.Close()
	p := newPeer(t, server)
	p.sendRaw(`{"v":1,"type":"error"}` + "\n")                                 // schema violation in an error frame
	p.sendRaw(`{"v":1,"type":"error","code":"internal","message":"x"}` + "\n") // a valid one
	p.send(&ListFrame{})                                                       // something that is delivered after both
	for f := range got {
		if _, ok := f.(*ListFrame); ok {
			break
		}
	}
	// Now the first frame the peer reads must be our own, not an error.
	if err := c.Send(context.Background(), &StopFrame{InstanceID: "marker"}); err != nil {
		t.Fatal(err)
	}
	if f := p.next(); f.FrameType() != TypeStop {
		t.Fatalf("peer got %#v first, want our stop frame (no error reply)", f)
	}
}

func TestConnHeartbeatsAreSentAndSwallowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		var delivered []string
		var beats int
		c := NewConn(a, Options{
			Handler:     func(f Frame) { delivered = append(delivered, f.FrameType()) },
			OnHeartbeat: func() { beats++ },
		})
		defer c.Close()

		var sent []time.Duration
		start := time.Now()
		go func() {
			d := NewDecoder(b)
			for {
				f, err := d.Decode()
				if err != nil {
					return
				}
				if f.FrameType() == TypeHeartbeat {
					sent = append(sent, time.Since(start))
				}
			}
		}()
		enc := NewEncoder(b)
		for range 3 {
			time.Sleep(10 * time.Second) // virtual time
			enc.Encode(&HeartbeatFrame{})
		}
		enc.Encode(&EventFrame{InstanceID: "i", Event: json.RawMessage(`1`)})
		time.Sleep(15 * time.Second)
		synctest.Wait()

		if want := []time.Duration{15 * time.Second, 30 * time.Second, 45 * time.Second}; !cmp.Equal(sent, want) {
			t.Errorf("heartbeats sent at %v, want %v", sent, want)
		}
		if beats != 3 || !cmp.Equal(delivered, []string{TypeEvent}) {
			t.Errorf("%d heartbeats seen, handler got %v; want 3 swallowed and only the event delivered", beats, delivered)
		}
		if c.Err() != nil {
			t.Errorf("connection closed: %v", c.Err())
		}
	})
}

func TestConnExpiresWhenNothingArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		go io.Copy(io.Discard, b) // the peer reads our heartbeats, sends nothing
		wantExpiredAfter(t, NewConn(a, Options{}), time.Now(), DefaultExpiryTimeout)
	})
}

// Any byte re-arms the expiry: a record that trickles in a byte at a time
// keeps the connection alive although it never completes.
func TestConnAnyByteRearmsExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		go io.Copy(io.Discard, b)
		c := NewConn(a, Options{})
		start := time.Now()
		for range 5 {
			time.Sleep(40 * time.Second)
			b.Write([]byte(" "))
		}
		synctest.Wait()
		if c.Err() != nil {
			t.Fatalf("closed at %v although bytes kept arriving: %v", time.Since(start), c.Err())
		}
		wantExpiredAfter(t, c, time.Now(), DefaultExpiryTimeout)
	})
}

// A peer that stops reading cannot make the sender buffer without bound:
// the queue holds SendQueue frames, TrySend fails fast, Send waits for its
// context, and after StallTimeout the connection closes as stalled.
func TestConnSendQueueIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe() // unbuffered: a write blocks until the peer reads
		defer b.Close()
		stop := make(chan struct{})
		defer close(stop)
		go func() { // the peer keeps talking but never reads
			enc := NewEncoder(b)
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Second):
				}
				if enc.Encode(&HeartbeatFrame{}) != nil {
					return
				}
			}
		}()
		c := NewConn(a, Options{SendQueue: 4, StallTimeout: 30 * time.Second, ExpiryTimeout: time.Hour})
		ev := &EventFrame{InstanceID: "i", Event: json.RawMessage(`{}`)}

		// The writer takes one frame and blocks writing it; four more fill
		// the queue.
		if err := c.TrySend(ev); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for i := range 4 {
			if err := c.TrySend(ev); err != nil {
				t.Fatalf("frame %d of a 4-deep queue: %v", i+2, err)
			}
		}
		if err := c.TrySend(ev); !errors.Is(err, ErrSendQueueFull) {
			t.Fatalf("TrySend on a full queue: %v, want ErrSendQueueFull", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Send(ctx, ev); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send on a full queue: %v, want context.DeadlineExceeded", err)
		}

		blocked := make(chan error, 1)
		go func() { blocked <- c.Send(context.Background(), ev) }()
		start := time.Now()
		<-c.Done()
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Errorf("stall detected after %v, want within StallTimeout", elapsed)
		}
		wantReason(t, c, ReasonStalled)
		if err := <-blocked; !errors.Is(err, ReasonStalled) {
			t.Errorf("blocked Send returned %v, want the stall", err)
		}
	})
}

// AwaitRoom returns at once while the queue has room, waits while it is
// full until the writer takes frames off it, and gives up with the
// context's error or the connection's close.
func TestConnAwaitRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe() // unbuffered: a write blocks until the peer reads
		defer b.Close()
		c := NewConn(a, Options{SendQueue: 2, ExpiryTimeout: time.Hour, StallTimeout: time.Hour})
		defer c.Close()
		ev := &EventFrame{InstanceID: "i", Event: json.RawMessage(`{}`)}
		if err := c.AwaitRoom(t.Context()); err != nil {
			t.Fatalf("AwaitRoom on an empty queue: %v", err)
		}
		for c.TrySend(ev) == nil { // fill it (one frame in the writer's hands)
			synctest.Wait()
		}

		cancelled, cancel := context.WithCancel(t.Context())
		cancel()
		if err := c.AwaitRoom(cancelled); !errors.Is(err, context.Canceled) {
			t.Fatalf("AwaitRoom on a full queue, context cancelled: %v, want context.Canceled", err)
		}

		waited := make(chan error, 1)
		go func() { waited <- c.AwaitRoom(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-waited:
			t.Fatalf("AwaitRoom returned %v while the queue is full", err)
		default:
		}
		d := NewDecoder(b)
		if _, err := d.Decode(); err != nil { // the writer's frame is read: it takes the queue
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case err := <-waited:
			if err != nil {
				t.Fatalf("AwaitRoom after the queue drained: %v", err)
			}
		default:
			t.Fatal("AwaitRoom still waits after the writer emptied the queue")
		}
		if err := c.TrySend(ev); err != nil {
			t.Fatalf("TrySend after AwaitRoom: %v", err)
		}

		for c.TrySend(ev) == nil { // full again (the writer is blocked on the peer)
			synctest.Wait()
		}
		go func() { waited <- c.AwaitRoom(t.Context()) }()
		synctest.Wait()
		c.Close()
		if err := <-waited; !errors.Is(err, ErrClosed) {
			t.Fatalf("AwaitRoom when the connection closes: %v, want ErrClosed", err)
		}
	})
}

// Heartbeats never wait behind a full queue: with the queue full and the
// peer reading slowly, heartbeats still go out.
func TestConnHeartbeatsDoNotQueueBehindAFullQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := NewConn(a, Options{SendQueue: 2, ExpiryTimeout: time.Hour, StallTimeout: time.Hour})
		defer c.Close()
		for {
			if err := c.TrySend(&EventFrame{InstanceID: "i", Event: json.RawMessage(`{}`)}); err != nil {
				break // queue full (and one frame in the writer's hands)
			}
			synctest.Wait()
		}
		time.Sleep(DefaultHeartbeatInterval) // a heartbeat is due
		synctest.Wait()                      // and the round has handed it to the writer
		d := NewDecoder(b)
		var types []string
		for range 4 {
			f, err := d.Decode()
			if err != nil {
				t.Fatal(err)
			}
			types = append(types, f.FrameType())
		}
		// The frame the writer held goes first, then the heartbeat, before
		// the queued frames.
		if want := []string{TypeEvent, TypeHeartbeat, TypeEvent, TypeEvent}; !cmp.Equal(types, want) {
			t.Errorf("peer read %v, want %v", types, want)
		}
	})
}

func TestConnEncodeErrorsAreReturnedToTheSender(t *testing.T) {
	client, _ := tcpPair(t)
	c := NewConn(client, Options{})
	defer c.Close()
	var ee *EncodeError
	if err := c.Send(context.Background(), &EventFrame{Event: json.RawMessage(`{`)}); !errors.As(err, &ee) {
		t.Errorf("Send of an invalid frame: %v, want *EncodeError", err)
	}
	if c.Err() != nil {
		t.Errorf("an encode error closed the connection")
	}
}

func TestConnRequestIDsAreMintedUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := RandomRequestID()
		if len(id) != 14 || id[:2] != "r-" {
			t.Fatalf("id %q is not r- + 12 hex", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestConnConcurrentRequests(t *testing.T) {
	client, server := tcpPair(t)
	c := NewConn(client, Options{})
	defer c.Close()
	p := newPeer(t, server)
	go func() {
		// Answer in reverse order of arrival, to show matching is by id.
		var reqs []Frame
		for range 20 {
			reqs = append(reqs, p.next())
		}
		for i := len(reqs) - 1; i >= 0; i-- {
			f := reqs[i].(*StopFrame)
			p.send(&StoppedFrame{Header: Header{ID: f.ID}, InstanceID: f.InstanceID})
		}
	}()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			name := fmt.Sprintf("i-%d", i)
			r, err := c.Request(context.Background(), &StopFrame{InstanceID: name})
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			if got := r.(*StoppedFrame).InstanceID; got != name {
				t.Errorf("request for %s answered with %s", name, got)
			}
		})
	}
	wg.Wait()
}

// SendQueueBytes bounds the queue in bytes as well as in frames: a frame
// that does not fit is refused by TrySend and waited for by Send, an empty
// queue takes a frame of any size, and room comes back as the writer
// takes frames.
func TestConnSendQueueIsBoundedInBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe() // unbuffered: a write blocks until the peer reads
		defer b.Close()
		c := NewConn(a, Options{SendQueue: 64, SendQueueBytes: 1000, StallTimeout: time.Hour, ExpiryTimeout: time.Hour})
		defer c.Close()
		frame := func(n int) *EventFrame {
			return &EventFrame{InstanceID: "i", Event: json.RawMessage(`"` + strings.Repeat("x", n) + `"`)}
		}
		// The writer takes the first frame and blocks writing it.
		if err := c.TrySend(frame(10)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := c.QueuedBytes(); got != 0 {
			t.Fatalf("QueuedBytes with the only frame in the writer's hands = %d, want 0", got)
		}
		// An empty queue takes a frame bigger than the whole budget.
		if err := c.TrySend(frame(2000)); err != nil {
			t.Fatalf("a big frame into an empty queue: %v", err)
		}
		if err := c.TrySend(frame(10)); !errors.Is(err, ErrSendQueueFull) {
			t.Fatalf("TrySend past the byte budget: %v, want ErrSendQueueFull", err)
		}
		sent := make(chan error, 1)
		go func() { sent <- c.Send(context.Background(), frame(10)) }()
		synctest.Wait()
		select {
		case err := <-sent:
			t.Fatalf("Send past the byte budget returned %v before the writer took anything", err)
		default:
		}
		// The peer reads: the writer takes the big frame, and the waiting
		// Send gets its room.
		d := NewDecoder(b)
		go func() {
			for {
				if _, err := d.Decode(); err != nil {
					return
				}
			}
		}()
		if err := <-sent; err != nil {
			t.Fatalf("Send once the queue drained: %v", err)
		}
	})
}

// OnClose runs its function once when the connection closes, whoever
// closes it, and at once for a connection closed already; no goroutine
// waits for it meanwhile.
func TestConnOnCloseRunsOnceAfterTheClose(t *testing.T) {
	client, server := tcpPair(t)
	c := NewConn(client, Options{})
	ran := make(chan error, 4)
	c.OnClose(func() { ran <- c.Err() })
	c.OnClose(func() { ran <- c.Err() })
	select {
	case err := <-ran:
		t.Fatalf("OnClose ran on an open connection (Err %v)", err)
	default:
	}
	_ = server.Close() // the peer goes: the reader sees the end of the stream
	for range 2 {
		select {
		case err := <-ran:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("Err in OnClose = %v, want a closed error", err)
			}
		case <-time.After(failsafe):
			t.Fatal("OnClose did not run after the peer closed")
		}
	}
	_ = c.Close()
	c.OnClose(func() { ran <- c.Err() })
	select {
	case err := <-ran:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Err in a late OnClose = %v, want a closed error", err)
		}
	case <-time.After(failsafe):
		t.Fatal("OnClose on a closed connection did not run")
	}
	select {
	case <-ran:
		t.Error("an OnClose function ran twice")
	default:
	}
}
