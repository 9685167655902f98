package transport

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

const tcpLivenessHere = true

// setTCPLiveness sets tc's TCP user timeout to timeout and its keepalive
// probes to every interval once idle, as many as fit in timeout (the user
// timeout ends the connection first anyway: Linux then ignores the count).
func setTCPLiveness(tc *net.TCPConn, timeout, interval time.Duration) error {
	count := min(max(1, int((timeout+interval-1)/interval)), 127) // Linux takes at most 127
	if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: interval, Interval: interval, Count: count}); err != nil {
		return err
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(timeout.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}
