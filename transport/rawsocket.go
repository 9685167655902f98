package transport

import (
	"net"

	"example.com/pifleet/internal/rawio"
)

// rawSocket returns nc read and written raw (see rawio: a server's round
// of heartbeats is one small read from each of thousands of idle
// connections, and the plain calls' scheduler bookkeeping and monitor
// wakeups were most of its CPU), or nil where that is not available.
// Only the plain socket types: a wrapper (TLS, a byte counter, a
// handshake's read-ahead buffer) that happens to expose its socket must
// see every byte read and written.
func rawSocket(nc net.Conn) *rawio.Conn {
	switch nc := nc.(type) {
	case *net.TCPConn:
		return rawio.New(nc)
	case *net.UnixConn:
		return rawio.New(nc)
	}
	return nil
}
