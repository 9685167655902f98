package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/netfault"
)

// step is a transition reduced to what the tests compare.
type step struct {
	Event   ConnEvent
	To      ConnState
	RetryIn time.Duration
}

func steps(ts []Transition) []step {
	var out []step
	for _, t := range ts {
		out = append(out, step{t.Event, t.To, t.RetryIn})
	}
	return out
}

// recorder collects transitions and lets a test wait for a state.
type recorder struct {
	mu      sync.Mutex
	all     []Transition
	ch      chan Transition
	timeout time.Duration
}

// newRecorder returns a recorder whose waits fail after timeout: the
// failsafe for real time, something generous for virtual time.
func newRecorder(timeout time.Duration) *recorder {
	return &recorder{ch: make(chan Transition, 1000), timeout: timeout}
}

func (r *recorder) record(t Transition) {
	r.mu.Lock()
	r.all = append(r.all, t)
	r.mu.Unlock()
	r.ch <- t
}

func (r *recorder) transitions() []Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Transition(nil), r.all...)
}

// until returns the next transition into state, or fails after the
// recorder's timeout.
func (r *recorder) until(t *testing.T, state ConnState) Transition {
	t.Helper()
	timeout := time.After(r.timeout)
	for {
		select {
		case tr := <-r.ch:
			if tr.To == state {
				return tr
			}
		case <-timeout:
			t.Fatalf("no transition to %s; got %v", state, steps(r.transitions()))
		}
	}
}

// The reconnect delays of seed §2: 1 s, 2 s, 4 s … capped at 30 s,
// starting over at 1 s once a connection was established.
func TestRedialerReconnectDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var dials int
		peers := make(chan net.Conn, 4)
		failFirst := map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 9: true}
		rec := newRecorder(time.Hour) // virtual time
		r := NewRedialer(RedialConfig{
			Dial: func(ctx context.Context) (net.Conn, error) {
				dials++
				if failFirst[dials] {
					return nil, fmt.Errorf("dial %d: connection refused", dials)
				}
				a, b := net.Pipe()
				peers <- b
				return a, nil
			},
			Conn:         Options{ExpiryTimeout: time.Hour},
			OnTransition: rec.record,
		})
		runErr := make(chan error, 1)
		go func() { runErr <- r.Run(context.Background()) }()

		first := rec.until(t, StateEstablished)
		if r.State() != StateEstablished || r.Conn() != first.Conn || first.Conn == nil {
			t.Fatalf("State() = %s, Conn() = %p; want established with the new connection", r.State(), r.Conn())
		}
		(<-peers).Close() // the agent goes away
		rec.until(t, StateEstablished)
		r.Close()
		if err := <-runErr; err != nil {
			t.Fatalf("Run after Close: %v", err)
		}
		if r.State() != StateClosed || r.Conn() != nil {
			t.Errorf("after Close: %s, %v", r.State(), r.Conn())
		}

		s := time.Second
		fail := func(d time.Duration) []step {
			return []step{{EventDialFailed, StateLost, d}, {EventRetry, StateConnecting, 0}}
		}
		var want []step
		for _, d := range []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s} {
			want = append(want, fail(d)...)
		}
		want = append(want,
			step{EventTCPEstablished, StateAuthenticating, 0},
			step{EventAllowed, StateEstablished, 0},
			step{EventConnectionLost, StateLost, 1 * s}, // reset once established
			step{EventRetry, StateConnecting, 0})
		want = append(want, fail(2*s)...)
		want = append(want,
			step{EventTCPEstablished, StateAuthenticating, 0},
			step{EventAllowed, StateEstablished, 0},
			step{EventClose, StateClosed, 0})
		all := rec.transitions()
		if d := cmp.Diff(want, steps(all)); d != "" {
			t.Fatalf("transitions (-want +got):\n%s", d)
		}
		// The delay chosen is the delay waited (virtual time).
		for i, tr := range all {
			if tr.To == StateLost {
				if waited := all[i+1].At.Sub(tr.At); waited != tr.RetryIn {
					t.Errorf("transition %d: waited %v in lost, chose %v", i, waited, tr.RetryIn)
				}
			}
		}
		for _, tr := range all {
			if tr.Event == EventConnectionLost && !errors.Is(tr.Err, ReasonPeerClosed) {
				t.Errorf("connectionLost carries %v, want the connection's close reason", tr.Err)
			}
		}
	})
}

func TestRedialerRejectsADeniedPeerForGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var dials int
		rec := newRecorder(time.Hour) // virtual time
		r := NewRedialer(RedialConfig{
			Dial: func(ctx context.Context) (net.Conn, error) {
				dials++
				a, b := net.Pipe()
				go func() { <-ctx.Done(); b.Close() }()
				return a, nil
			},
			Authenticate: func(ctx context.Context, c *Conn) error {
				return fmt.Errorf("%w: machine evil is not the pinned server", ErrDenied)
			},
			OnTransition: rec.record,
		})
		err := r.Run(context.Background())
		if !errors.Is(err, ErrRejected) || !errors.Is(err, ErrDenied) {
			t.Fatalf("Run = %v, want ErrRejected wrapping ErrDenied", err)
		}
		time.Sleep(time.Hour)
		if dials != 1 || r.State() != StateRejected {
			t.Errorf("%d dials, state %s; want one dial and rejected", dials, r.State())
		}
		want := []step{{EventTCPEstablished, StateAuthenticating, 0}, {EventDenied, StateRejected, 0}}
		if d := cmp.Diff(want, steps(rec.transitions())); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
}

// A handshake that times out (no hello) is retried; the hook sees the
// peer's hello through Conn.Receive.
func TestRedialerRetriesAFailedHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var dials int
		rec := newRecorder(time.Hour) // virtual time
		var hellos []string
		r := NewRedialer(RedialConfig{
			Dial: func(ctx context.Context) (net.Conn, error) {
				dials++
				a, b := net.Pipe()
				if dials > 1 { // the second agent says hello
					go NewEncoder(b).Encode(&HelloFrame{Machine: "agent-1", Role: RoleAgent, PackageVersion: "0.0.1", Platform: "linux"})
				}
				return a, nil
			},
			Authenticate: func(ctx context.Context, c *Conn) error {
				f, err := c.Receive(ctx)
				if err != nil {
					return err
				}
				h, ok := f.(*HelloFrame)
				if !ok {
					return fmt.Errorf("expected hello, got %s", f.FrameType())
				}
				hellos = append(hellos, h.Machine)
				return nil
			},
			Conn:         Options{ExpiryTimeout: time.Hour},
			OnTransition: rec.record,
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go r.Run(ctx)
		rec.until(t, StateEstablished)
		cancel()
		rec.until(t, StateClosed)

		want := []step{
			{EventTCPEstablished, StateAuthenticating, 0},
			{EventHandshakeFailed, StateLost, time.Second},
			{EventRetry, StateConnecting, 0},
			{EventTCPEstablished, StateAuthenticating, 0},
			{EventAllowed, StateEstablished, 0},
			{EventClose, StateClosed, 0},
		}
		all := rec.transitions()
		if d := cmp.Diff(want, steps(all)); d != "" {
			t.Fatalf("(-want +got):\n%s", d)
		}
		if !errors.Is(all[1].Err, context.DeadlineExceeded) {
			t.Errorf("handshakeFailed carries %v, want the handshake timeout", all[1].Err)
		}
		if !cmp.Equal(hellos, []string{"agent-1"}) {
			t.Errorf("hellos seen: %v", hellos)
		}
	})
}

// agentServer runs a transport.Server on loopback that admits 127.0.0.1
// only and greets every connection with a hello, like an agent.
func agentServer(t *testing.T, opts Options) (addr string, gateCalls func() []netip.AddrPort) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []netip.AddrPort
	srv := &Server{
		Gate: func(ctx context.Context, remote netip.AddrPort) error {
			mu.Lock()
			calls = append(calls, remote)
			mu.Unlock()
			if !remote.Addr().IsLoopback() {
				return fmt.Errorf("%w: %s is not on loopback", ErrDenied, remote)
			}
			return nil
		},
		Options: opts,
		Handle: func(c *Conn) {
			c.Send(context.Background(), &HelloFrame{Machine: "agent-1", Role: RoleAgent, PackageVersion: "0.0.1", Platform: "linux"})
			c.SetHandler(func(Frame) {})
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), func() []netip.AddrPort {
		mu.Lock()
		defer mu.Unlock()
		return append([]netip.AddrPort(nil), calls...)
	}
}

func waitForHello(ctx context.Context, c *Conn) error {
	f, err := c.Receive(ctx)
	if err != nil {
		return err
	}
	if _, ok := f.(*HelloFrame); !ok {
		return fmt.Errorf("expected hello, got %s", f.FrameType())
	}
	return nil
}

// Real TCP through a fault-injecting proxy: a cut is noticed at once and
// redialled; a stall is noticed by expiry within the configured window
// and redialled once traffic flows again.
func TestRedialerOverTCPThroughFaultyProxy(t *testing.T) {
	fast := Options{HeartbeatInterval: 50 * time.Millisecond, ExpiryTimeout: 250 * time.Millisecond}
	addr, gateCalls := agentServer(t, fast)
	proxy, err := netfault.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	rec := newRecorder(failsafe)
	var d net.Dialer
	r := NewRedialer(RedialConfig{
		Dial:             func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", proxy.Addr()) },
		Authenticate:     waitForHello,
		HandshakeTimeout: 300 * time.Millisecond,
		RetryMin:         10 * time.Millisecond,
		RetryMax:         40 * time.Millisecond,
		Conn:             fast,
		OnTransition:     rec.record,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(ctx) }()

	first := rec.until(t, StateEstablished).Conn

	proxy.Cut()
	lost := rec.until(t, StateLost)
	if lost.Event != EventConnectionLost || !(errors.Is(lost.Err, ReasonPeerClosed) || errors.Is(lost.Err, ReasonIO)) {
		t.Fatalf("after a cut: %s with %v, want connectionLost (peer closed or reset)", lost.Event, lost.Err)
	}
	second := rec.until(t, StateEstablished).Conn
	if second == first {
		t.Fatal("re-established on the old connection")
	}

	proxy.Stall(netfault.Both)
	lost = rec.until(t, StateLost)
	if lost.Event != EventConnectionLost || !errors.Is(lost.Err, ReasonExpired) {
		t.Fatalf("after a stall: %s with %v, want connectionLost by expiry", lost.Event, lost.Err)
	}
	// While stalled, new attempts get TCP (the proxy accepts) but no hello.
	if tr := rec.until(t, StateLost); tr.Event != EventHandshakeFailed {
		t.Fatalf("attempt during the stall: %s, want handshakeFailed", tr.Event)
	}
	proxy.Resume()
	rec.until(t, StateEstablished)

	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, ap := range gateCalls() {
		if ap.Addr() != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("gate saw %s, want 127.0.0.1", ap)
		}
	}
}

// Handshake runs on the raw connection before the Conn starts: a failure
// is a failed handshake (retried), and the connection it returns is the
// one the Conn runs on.
func TestRedialerHandshakeOnTheRawConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(time.Hour)
		var dials int
		peers := make(chan net.Conn, 2)
		r := NewRedialer(RedialConfig{
			Dial: func(ctx context.Context) (net.Conn, error) {
				dials++
				a, b := net.Pipe()
				peers <- b
				return a, nil
			},
			Handshake: func(ctx context.Context, nc net.Conn) (net.Conn, error) {
				if dials == 1 {
					return nil, errors.New("no proof")
				}
				return nc, nil
			},
			Authenticate: func(ctx context.Context, c *Conn) error {
				if dials == 1 {
					t.Error("Authenticate ran after a failed Handshake")
				}
				return nil
			},
			OnTransition: rec.record,
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		first := <-peers
		if _, err := first.Read(make([]byte, 1)); err == nil {
			t.Error("the connection of a failed handshake is open")
		}
		<-peers
		synctest.Wait()
		if r.State() != StateEstablished || r.Conn() == nil {
			t.Fatalf("state %s after a good handshake", r.State())
		}
		cancel()
		<-done
		want := []step{{EventTCPEstablished, StateAuthenticating, 0}, {EventHandshakeFailed, StateLost, time.Second},
			{EventRetry, StateConnecting, 0}, {EventTCPEstablished, StateAuthenticating, 0}, {EventAllowed, StateEstablished, 0}}
		got := steps(rec.transitions())
		if len(got) > len(want) {
			got = got[:len(want)]
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
}

// Stopping a Redialer closes its machine from whichever state it is in:
// a dial that has not completed, a handshake waiting for the peer's
// hello, or the delay before the next attempt.
func TestRedialerStoppedInEveryStateCloses(t *testing.T) {
	cases := map[ConnState]RedialConfig{
		StateConnecting: {
			Dial: func(ctx context.Context) (net.Conn, error) {
				<-ctx.Done() // the network never answers
				return nil, ctx.Err()
			},
		},
		StateAuthenticating: {
			Dial: func(ctx context.Context) (net.Conn, error) {
				a, b := net.Pipe()
				go io.Copy(io.Discard, b) // the peer reads, says nothing, ends with a
				return a, nil
			},
			Authenticate: func(ctx context.Context, c *Conn) error {
				_, err := c.Receive(ctx) // waits for a hello that never comes
				return err
			},
		},
		StateLost: {
			Dial: func(context.Context) (net.Conn, error) {
				return nil, errors.New("connection refused")
			},
			RetryMin: time.Hour, RetryMax: time.Hour,
		},
	}
	for from, cfg := range cases {
		t.Run(string(from), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := newRecorder(time.Hour) // virtual time
				cfg.OnTransition = rec.record
				r := NewRedialer(cfg)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- r.Run(ctx) }()
				synctest.Wait()
				if r.State() != from {
					t.Fatalf("state %s, want %s", r.State(), from)
				}
				cancel()
				tr := rec.until(t, StateClosed)
				if tr.From != from || tr.Event != EventClose {
					t.Errorf("closed by %s from %s, want close from %s", tr.Event, tr.From, from)
				}
				if err := <-done; err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
			})
		})
	}
}
