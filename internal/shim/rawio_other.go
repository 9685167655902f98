//go:build unix && !linux

package shim

import "syscall"

// rawIO is Linux's; elsewhere the relay reads and writes as usual.
type rawIO struct{ relayConn }

func newRawIO(syscall.Conn) *rawIO { return nil }
