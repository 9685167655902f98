//go:build !unix

package transport

import (
	"net"
	"syscall"
)

// rawConn returns nil: without a non-blocking write here, every heartbeat
// is handed to the connection's writer.
func rawConn(net.Conn) syscall.RawConn { return nil }

func writeNow(syscall.RawConn, []byte) int { return 0 }
