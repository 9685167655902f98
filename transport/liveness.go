package transport

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// CapabilityTCPLiveness, in a hello's capabilities, says: "I detect the
// loss of this connection from TCP itself, so you need not send me
// heartbeats". A pifleet agent announces it where it can honour it (Linux,
// a plain TCP socket, not behind a proxy) and a pifleet server announces
// that it understands it. When both did, the server sends that agent no
// heartbeats (Conn.StopHeartbeats) but still expects the agent's and
// expires the connection after 45 s without a byte, as before; the agent
// keeps sending its heartbeats and lets TCP watch the connection
// (Conn.WatchTCP) instead of expiring it when the idle server is silent.
// A server of 10,000 idle agents then wakes for their heartbeats only,
// not also to write 10,000 of its own every 15 s. A TypeScript peer
// announces nothing and both directions beat as before.
//
// The cost: such an agent no longer notices a server process that hangs
// while its machine's TCP stack still answers (it would redial into the
// same hung process anyway). A dead server machine, a cut network or a
// closed socket are still noticed: a reset or an end of stream at once,
// unacknowledged heartbeats or keepalive probes after the TCP user
// timeout.
const CapabilityTCPLiveness = "tcp-liveness"

// ErrNoTCPLiveness is returned by WatchTCP for a connection whose loss TCP
// cannot be made to detect here: not a TCP socket, or not on Linux.
var ErrNoTCPLiveness = errors.New("transport: TCP liveness needs a TCP socket on Linux")

// StopHeartbeats stops the heartbeats this connection sends: the peer
// announced CapabilityTCPLiveness (it detects the loss of the connection
// from TCP itself). Everything else stays: the peer's heartbeats are
// still expected and the connection still expires after ExpiryTimeout
// without a byte. Once it returns no heartbeat begins (the rest of one
// partly written before is still sent, as the stream needs it). It cannot
// be undone; calling it again does nothing.
func (c *Conn) StopHeartbeats() {
	c.beats.leave(c)
	c.beatsOff.Store(true)
	// A heartbeat a round began before the flag was set holds wmu until
	// it is written; any later one sees the flag under wmu.
	c.wmu.Lock()
	//lint:ignore SA2001 an empty critical section is the barrier
	c.wmu.Unlock()
}

// HeartbeatsStopped reports whether StopHeartbeats was called.
func (c *Conn) HeartbeatsStopped() bool { return c.beatsOff.Load() }

// WatchTCP makes TCP detect the loss of this connection instead of the
// receive expiry, for a peer that sends no heartbeats (it stopped them on
// this side's CapabilityTCPLiveness): the socket gets a TCP user timeout
// of ExpiryTimeout (data this side sent, its heartbeats included, that
// stays unacknowledged for that long closes the connection) and
// keepalive probes every HeartbeatInterval once the socket is idle, and
// the connection no longer expires when nothing arrives. This side's
// heartbeats go on: the peer still expires without them.
//
// A peer whose machine dies, whose network is cut or whose socket closes
// is still detected (a reset or end of stream at once, otherwise after the
// user timeout, which closes the connection as ReasonExpired with the
// system's "connection timed out" as its cause); a peer process that
// hangs while its machine's TCP stack answers is not.
//
// It fails with ErrNoTCPLiveness when the connection is not a TCP socket
// (CanWatchTCP) or not on Linux, and with the system's error when the
// socket refuses the options; the connection is then left as it was.
func (c *Conn) WatchTCP() error {
	tc := tcpSocket(c.nc)
	if tc == nil || !tcpLivenessHere {
		return fmt.Errorf("%w (this connection is a %T)", ErrNoTCPLiveness, c.nc)
	}
	if err := setTCPLiveness(tc, c.opts.ExpiryTimeout, c.opts.HeartbeatInterval); err != nil {
		return fmt.Errorf("transport: letting TCP watch the connection to %s: %w", c.nc.RemoteAddr(), err)
	}
	c.tcpWatched.Store(true)
	// The reader may set a deadline once more before it sees the flag;
	// when that one passes, it clears it (expiryReader).
	_ = c.nc.SetReadDeadline(time.Time{})
	return nil
}

// CanWatchTCP reports whether WatchTCP can work on nc: a TCP socket, seen
// through wrappers that expose it (NetConn), on Linux. A side announces
// CapabilityTCPLiveness only when it can.
func CanWatchTCP(nc net.Conn) bool {
	return tcpLivenessHere && tcpSocket(nc) != nil
}

// tcpSocket returns the TCP socket under nc, unwrapping connections that
// expose theirs with a NetConn method (a handshake's read-ahead buffer,
// TLS), or nil. Socket options may be set through a wrapper; writes never
// are (see rawSocket).
func tcpSocket(nc net.Conn) *net.TCPConn {
	for range 8 { // a bound, should wrappers ever form a cycle
		switch w := nc.(type) {
		case *net.TCPConn:
			return w
		case interface{ NetConn() net.Conn }:
			nc = w.NetConn()
		default:
			return nil
		}
	}
	return nil
}
