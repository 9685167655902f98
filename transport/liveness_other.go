//go:build !linux

package transport

import (
	"net"
	"time"
)

// Elsewhere the TCP user timeout is missing or means something else.
const tcpLivenessHere = false

func setTCPLiveness(*net.TCPConn, time.Duration, time.Duration) error { return ErrNoTCPLiveness }
