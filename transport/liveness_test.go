package transport

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// beatCounter counts the heartbeats a Conn receives (Options.OnHeartbeat)
// and closes reached once it has counted n.
type beatCounter struct {
	n       int64
	got     atomic.Int64
	once    sync.Once
	reached chan struct{}
}

func newBeatCounter(n int64) *beatCounter {
	return &beatCounter{n: n, reached: make(chan struct{})}
}

func (b *beatCounter) beat() {
	if b.got.Add(1) == b.n {
		b.once.Do(func() { close(b.reached) })
	}
}

func (b *beatCounter) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-b.reached:
	case <-time.After(failsafe):
		t.Fatalf("%s received %d heartbeats, want %d", what, b.got.Load(), b.n)
	}
}

// Over loopback TCP, with a round every 2 ms: a server connection whose
// agent announced TCP liveness (StopHeartbeats) sends it none across
// many rounds while still receiving the agent's; a v1 pair sharing the
// same rounds keeps beating both ways. The stopped connection has left
// the round.
func TestStoppedHeartbeatsAreNotSentWhileThePeerStillBeats(t *testing.T) {
	const every = 2 * time.Millisecond
	beats := NewHeartbeats()
	open := func(beats *Heartbeats, count *beatCounter) func(net.Conn) *Conn {
		return func(nc net.Conn) *Conn {
			c := NewConn(nc, Options{Heartbeats: beats, HeartbeatInterval: every, ExpiryTimeout: failsafe, OnHeartbeat: count.beat})
			t.Cleanup(func() { c.Close() })
			return c
		}
	}
	const rounds = 20
	v1Server, v1Agent := newBeatCounter(rounds), newBeatCounter(rounds)
	quietServer, quietAgent := newBeatCounter(rounds), newBeatCounter(1)

	c1, a1 := tcpPair(t)
	c2, a2 := tcpPair(t)
	quiet := open(beats, quietServer)(c2)
	quiet.StopHeartbeats()
	open(nil, quietAgent)(a2)
	open(beats, v1Server)(c1)
	open(nil, v1Agent)(a1)

	v1Agent.wait(t, "the v1 agent")
	v1Server.wait(t, "the v1 server")
	quietServer.wait(t, "the server whose heartbeats stopped")
	if n := quietAgent.got.Load(); n != 0 {
		t.Errorf("the agent whose server stopped its heartbeats received %d across %d rounds, want 0", n, rounds)
	}
	beats.mu.Lock()
	r := beats.rounds[every]
	_, in := r.conns[quiet]
	members := len(r.conns)
	beats.mu.Unlock()
	if in || members != 1 {
		t.Errorf("the round holds %d connections (the stopped one: %v), want the v1 one alone", members, in)
	}
	if quiet.Err() != nil {
		t.Errorf("the stopped connection closed: %v", quiet.Err())
	}
}

// A connection whose heartbeats stopped still expires ExpiryTimeout after
// the last byte it received, having sent none; the round's goroutine ends
// once its only connection stopped (synctest fails on one left behind).
func TestStoppedHeartbeatsKeepTheExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		c := NewConn(a, Options{Heartbeats: NewHeartbeats()})
		c.StopHeartbeats()
		c.StopHeartbeats() // again: nothing more
		read := make(chan int)
		go func() {
			n := 0
			d := NewDecoder(b)
			for {
				f, err := d.Decode()
				if err != nil {
					read <- n
					return
				}
				if f.FrameType() == TypeHeartbeat {
					n++
				}
			}
		}()
		enc := NewEncoder(b)
		for range 4 { // the peer beats for a minute
			time.Sleep(DefaultHeartbeatInterval)
			if err := enc.Encode(&HeartbeatFrame{}); err != nil {
				t.Fatal(err)
			}
		}
		wantExpiredAfter(t, c, time.Now(), DefaultExpiryTimeout)
		b.Close()
		if n := <-read; n != 0 {
			t.Errorf("the peer read %d heartbeats from a connection whose heartbeats stopped, want 0", n)
		}
	})
}

// WatchTCP needs a TCP socket: on a pipe it fails with ErrNoTCPLiveness
// and the connection keeps its expiry.
func TestWatchTCPNeedsATCPSocket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		if CanWatchTCP(a) {
			t.Error("CanWatchTCP says yes for a pipe")
		}
		c := NewConn(a, Options{HeartbeatInterval: time.Hour})
		if err := c.WatchTCP(); !errors.Is(err, ErrNoTCPLiveness) {
			t.Fatalf("WatchTCP on a pipe: %v, want ErrNoTCPLiveness", err)
		}
		wantExpiredAfter(t, c, time.Now(), DefaultExpiryTimeout)
	})
}
