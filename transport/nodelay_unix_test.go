//go:build unix

package transport

import (
	"net"
	"syscall"
	"testing"
)

// noDelay reads TCP_NODELAY from the socket itself.
func noDelay(t *testing.T, c *net.TCPConn) bool {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return v != 0
}
