package transport

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// deadlineCounter counts the read deadlines set on a connection and the
// reads that ended because one passed.
type deadlineCounter struct {
	net.Conn
	set, passed atomic.Int64
}

func (d *deadlineCounter) SetReadDeadline(t time.Time) error {
	d.set.Add(1)
	return d.Conn.SetReadDeadline(t)
}

func (d *deadlineCounter) Read(p []byte) (int, error) {
	n, err := d.Conn.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		d.passed.Add(1)
	}
	return n, err
}

// The read deadline moves only when the expiry it holds is more than a
// quarter of ExpiryTimeout (11.25 s) behind the one due, and never passes
// while the peer is heard from: a peer that sends a heartbeat every
// second for 3 minutes costs 16 deadline updates, not one per read; one
// that beats every 15 s costs one per heartbeat. Either way the
// connection expires exactly ExpiryTimeout after the last byte.
func TestExpiryMovesTheReadDeadlineOnlyWhenItIsWellBehind(t *testing.T) {
	for _, tc := range []struct {
		every   time.Duration
		wantSet int64
	}{
		// Opened at 0 (deadline 45 s), then moved after the bytes at 12,
		// 24, … 180 s: 1 + 15.
		{time.Second, 16},
		// Opened, then moved after each of the 12 heartbeats.
		{15 * time.Second, 13},
	} {
		t.Run(tc.every.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := net.Pipe()
				defer b.Close()
				go io.Copy(io.Discard, b) // our heartbeats
				nc := &deadlineCounter{Conn: a}
				c := NewConn(nc, Options{})
				start := time.Now()
				enc := NewEncoder(b)
				for time.Since(start) < 180*time.Second {
					time.Sleep(tc.every)
					if err := enc.Encode(&HeartbeatFrame{}); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				if c.Err() != nil {
					t.Fatalf("closed at %v although the peer beat every %v: %v", time.Since(start), tc.every, c.Err())
				}
				if got := nc.set.Load(); got != tc.wantSet {
					t.Errorf("read deadline set %d times in 180 s of heartbeats every %v, want %d", got, tc.every, tc.wantSet)
				}
				if got := nc.passed.Load(); got != 0 {
					t.Errorf("the read deadline passed %d times while the peer beat, want 0", got)
				}
				wantExpiredAfter(t, c, time.Now(), DefaultExpiryTimeout)
			})
		})
	}
}

// A connection that falls silent after a burst of traffic, whose deadline
// is then up to a quarter of the expiry early, still expires exactly
// ExpiryTimeout after its last byte: the early deadline is moved on.
func TestExpiryIsExactAfterABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		go io.Copy(io.Discard, b)
		c := NewConn(a, Options{})
		enc := NewEncoder(b)
		for range 10 { // bytes at 1 … 10 s: the deadline stays at 45 s
			time.Sleep(time.Second)
			if err := enc.Encode(&HeartbeatFrame{}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
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
