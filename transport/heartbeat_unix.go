//go:build unix

package transport

import (
	"net"
	"syscall"
)

// rawConn returns nc's descriptor access when nc is a socket the
// heartbeat goroutine may write without blocking.
func rawConn(nc net.Conn) syscall.RawConn {
	// Only the plain socket types: a wrapper (TLS, a byte counter) that
	// happens to expose its socket must see every byte written.
	var sc syscall.Conn
	switch nc := nc.(type) {
	case *net.TCPConn:
		sc = nc
	case *net.UnixConn:
		sc = nc
	default:
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// writeNow makes one non-blocking write of p and returns how many bytes
// went out (0 when the socket buffer is full or on any error: the writer
// then writes p itself and sees the error, if there is one).
func writeNow(raw syscall.RawConn, p []byte) int {
	n := 0
	_ = raw.Write(func(fd uintptr) bool {
		m, err := syscall.Write(int(fd), p)
		if err == nil && m > 0 {
			n = m
		}
		return true // never wait for room: the writer does that
	})
	return n
}
