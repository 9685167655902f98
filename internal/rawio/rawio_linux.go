package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// New wraps c, or returns nil when its descriptor is a blocking one (a
// raw call on it could hold a P indefinitely) or cannot be reached.
func New(c syscall.Conn) *Conn {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	nonblocking := false
	if rc.Control(func(fd uintptr) {
		fl, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		nonblocking = e == 0 && fl&syscall.O_NONBLOCK != 0
	}) != nil || !nonblocking {
		return nil
	}
	out := &Conn{rc: rc}
	switch c := c.(type) {
	case net.Conn:
		out.nc = c
	case *os.File:
		out.file = c
	}
	return out
}

// Read reads what the descriptor has, waiting for some when it has none.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		n, errno = call(syscall.SYS_READ, fd, p)
		return errno != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, c.pollError("read", err)
	case errno != 0:
		return 0, c.wrap("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, waiting for room as often as it must, or fails.
func (c *Conn) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			m, e := call(syscall.SYS_WRITE, fd, p[n:])
			switch e {
			case 0:
				n += m
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return n, c.pollError("write", err)
	case errno != 0:
		return n, c.wrap("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// TryWrite makes one write of p that does not wait and reports how many
// bytes went out: 0 when the descriptor has no room or on any error (the
// caller then writes with Write, which waits and reports the error).
func (c *Conn) TryWrite(p []byte) int {
	if len(p) == 0 {
		return 0
	}
	n := 0
	_ = c.rc.Write(func(fd uintptr) bool {
		if m, e := call(syscall.SYS_WRITE, fd, p); e == 0 {
			n = m
		}
		return true // never wait for room
	})
	return n
}

// call makes one raw read or write (trap) of p, which is not empty, on
// fd, again as long as a signal interrupts it.
func call(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		r0, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e != syscall.EINTR {
			return int(r0), e
		}
	}
}

// pollError is an error of the poller (a closed descriptor, a deadline)
// as the plain call reports it: a closed file's as os.ErrClosed (a closed
// socket's already matches net.ErrClosed).
func (c *Conn) pollError(op string, err error) error {
	if c.file != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		err = os.ErrClosed
	}
	return c.wrap(op, err)
}
