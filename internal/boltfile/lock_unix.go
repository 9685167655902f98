//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package boltfile

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lock takes an exclusive flock on f, waiting up to timeout. bbolt takes
// the same lock on the same open file later, which then succeeds at once:
// the file is checked under the lock that keeps a second daemon out.
func lock(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case !errors.Is(err, syscall.EWOULDBLOCK):
			return err
		case time.Now().After(deadline):
			return ErrLocked
		}
		time.Sleep(50 * time.Millisecond) // bbolt polls its lock at the same pace
	}
}
