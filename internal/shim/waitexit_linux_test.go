package shim

import (
	"syscall"
	"testing"
)

// waitExitFunc opens a pidfd for pid (which need not be a child of this
// process) and returns a function that blocks until that process exits.
func waitExitFunc(t *testing.T, pid int) func() {
	t.Helper()
	const sysPidfdOpen = 434 // the same number on every Linux architecture
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno != 0 {
		t.Fatalf("pidfd_open(%d): %v", pid, errno)
	}
	return func() {
		t.Helper()
		defer syscall.Close(int(fd))
		ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(ep)
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, int(fd), &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			t.Fatal(err)
		}
		events := make([]syscall.EpollEvent, 1)
		for {
			n, err := syscall.EpollWait(ep, events, -1)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				return
			}
		}
	}
}
