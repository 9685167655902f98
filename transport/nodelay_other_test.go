//go:build !unix

package transport

import (
	"net"
	"testing"
)

func noDelay(t *testing.T, _ *net.TCPConn) bool {
	t.Skip("TCP_NODELAY is read with getsockopt, unix only")
	return false
}
