//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package cache

import (
	"errors"
	"os"
	"syscall"
)

// lockSupported tells whether tryLock gives real, crash-safe locks: the
// kernel drops a flock when its process dies, even by kill -9.
const lockSupported = true

// tryLock takes an exclusive lock on f without waiting.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		default:
			return false, err
		}
	}
}
