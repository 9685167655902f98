package transport

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// deadlineCounter counts the read deadlines set on a connection.
type deadlineCounter struct {
	net.Conn
	set atomic.Int64
}

func (d *deadlineCounter) SetReadDeadline(t time.Time) error {
	d.set.Add(1)
	return d.Conn.SetReadDeadline(t)
}

// A peer heard from every 14 s keeps the connection, whose read deadline
// moves once per expiry (when it passes) rather than on every heartbeat
// received: at 10,000 agents that is 10,000 timer updates a round saved.
// The connection still expires exactly ExpiryTimeout after the last byte.
func TestExpiryMovesTheReadDeadlineOnlyWhenItPasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		go io.Copy(io.Discard, b) // our heartbeats
		nc := &deadlineCounter{Conn: a}
		c := NewConn(nc, Options{})
		start := time.Now()
		enc := NewEncoder(b)
		// Every 14 s (not 15: a deadline passing at the very instant a
		// byte arrives could go either way), the last at 182 s.
		for range 13 {
			time.Sleep(14 * time.Second)
			if err := enc.Encode(&HeartbeatFrame{}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if c.Err() != nil {
			t.Fatalf("closed at %v although the peer beat every 14 s: %v", time.Since(start), c.Err())
		}
		// Set at 0 (as opened) and moved as each passed, to 45 s after
		// the last heartbeat then: at 45 (to 87), 87 (to 129), 129 (to
		// 171) and 171 s (to 213).
		if got := nc.set.Load(); got != 5 {
			t.Errorf("read deadline set %d times in 182 s of heartbeats every 14 s, want 5 (one when opened, one as each passed)", got)
		}
		wantExpiredAfter(t, c, time.Now(), DefaultExpiryTimeout)
	})
}

// A read deadline the caller's handshake left on the socket (a short
// wait for the peer's hello) does not expire the connection: the expiry
// counts from when the Conn opened.
func TestExpiryReplacesADeadlineLeftByTheHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		go io.Copy(io.Discard, b)
		if err := a.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		wantExpiredAfter(t, NewConn(a, Options{}), time.Now(), DefaultExpiryTimeout)
	})
}

// wantExpiredAfter waits for c to close and fails unless it expired
// exactly after (virtual time, in a synctest bubble) since from.
func wantExpiredAfter(t *testing.T, c *Conn, from time.Time, after time.Duration) {
	t.Helper()
	<-c.Done()
	if elapsed := time.Since(from); elapsed != after {
		t.Errorf("expired %v after the last byte (or the start), want %v", elapsed, after)
	}
	wantReason(t, c, ReasonExpired)
}
