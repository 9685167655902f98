package shim

import (
	"errors"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a descriptor of the relay (the worker's stdout,
// the agent's socket) with RawSyscall, waiting through the runtime's
// poller as os.File and net.Conn do. A plain read or write enters the
// scheduler's syscall path, and the first one after the shim was idle
// wakes the runtime's monitor thread, which then polls every 20 µs while
// the shim is busy: a streamed answer is thousands of such wakeups, and
// the monitor took a quarter of the shim's CPU. The descriptors are
// non-blocking, so a raw call never holds the shim's one P for long.
type rawIO struct {
	rc   syscall.RawConn
	file *os.File // nil for a socket
}

// newRawIO wraps c, or returns nil when its descriptor is a blocking one
// (a raw call on it could hold the shim's one P indefinitely).
func newRawIO(c syscall.Conn) *rawIO {
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
	f, _ := c.(*os.File)
	return &rawIO{rc: rc, file: f}
}

func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			r0, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			if e != syscall.EINTR {
				n, errno = int(r0), e
				return e != syscall.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, r.wrap("read", err)
	case errno != 0:
		return 0, &os.SyscallError{Syscall: "read", Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, or fails.
func (r *rawIO) Write(p []byte) (int, error) {
	var n int
	var errno syscall.Errno
	err := r.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			r0, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[n])), uintptr(len(p)-n))
			switch e {
			case 0:
				n += int(r0)
			case syscall.EINTR:
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
		return n, r.wrap("write", err)
	case errno != 0:
		return n, &os.SyscallError{Syscall: "write", Err: errno}
	}
	return n, nil
}

// wrap gives the poller's errors the meaning the callers test for: a
// closed os.File reads as os.ErrClosed (a closed net.Conn already matches
// net.ErrClosed), a deadline as os.ErrDeadlineExceeded.
func (r *rawIO) wrap(op string, err error) error {
	if r.file != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return &os.PathError{Op: op, Path: r.file.Name(), Err: os.ErrClosed}
	}
	return err
}
