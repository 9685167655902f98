package e2ekit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// termWait is how long a shim gets to end after SIGTERM before SIGKILL:
// it stops its worker (SIGTERM to the group, SIGKILL after the agent's
// kill grace, 3 s by default) and gives an attached agent 2 s to
// acknowledge the exit.
const termWait = 10 * time.Second

// endShimProcesses ends every process whose stderr is a shim log in dir
// (a shim: nothing else writes there), waiting for each to exit. The
// pids in stopped were already stopped through their socket and are only
// waited for; the others are reported. A pid is signalled through a pidfd opened
// while the process was seen to be a shim of dir, so a reused pid is
// never hit.
func endShimProcesses(ctx context.Context, dir string, stopped map[int]bool) ([]Leftover, error) {
	procs, err := shimProcesses(dir)
	if err != nil {
		return nil, err
	}
	var left []Leftover
	var errs []error
	for _, p := range procs {
		fd, err := unix.PidfdOpen(p.pid, 0)
		if err != nil {
			continue // gone already
		}
		// The pid could have ended and been reused between the scan and
		// the open: the pidfd must name a shim of dir.
		if id, ok := logOf(p.pid, dir); !ok || id != p.instanceID {
			unix.Close(fd)
			continue
		}
		if stopped[p.pid] {
			if !exitWithin(ctx, fd, termWait) {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
				errs = append(errs, fmt.Errorf("the shim of %s (pid %d) did not end after its exit was acknowledged; killed", p.instanceID, p.pid))
			}
			unix.Close(fd)
			continue
		}
		if !serving(dir, p.instanceID) {
			// Finishing on its own: its exit was acknowledged just before.
			if exitWithin(ctx, fd, termWait) {
				unix.Close(fd)
				continue
			}
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
			left = append(left, Leftover{InstanceID: p.instanceID, ShimPID: p.pid, How: Killed})
			continue
		}
		l := Leftover{InstanceID: p.instanceID, ShimPID: p.pid, How: Terminated}
		if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("SIGTERM to the shim of %s (pid %d): %w", p.instanceID, p.pid, err))
		}
		if !exitWithin(ctx, fd, termWait) {
			l.How = Killed
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			if !exitWithin(ctx, fd, termWait) {
				errs = append(errs, fmt.Errorf("the shim of %s (pid %d) survived SIGKILL", p.instanceID, p.pid))
			}
		}
		unix.Close(fd)
		left = append(left, l)
	}
	return left, errors.Join(errs...)
}

// shimProcesses scans /proc for the processes whose stderr is a shim log
// in dir.
func shimProcesses(dir string) ([]shimProcess, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []shimProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if id, ok := logOf(pid, dir); ok {
			out = append(out, shimProcess{pid: pid, instanceID: id})
		}
	}
	return out, nil
}

// logOf returns the instance id of the shim log in dir that pid's stderr
// is, if it is one.
func logOf(pid int, dir string) (string, bool) {
	target, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", "2"))
	if err != nil {
		return "", false
	}
	return instanceOfLog(dir, target)
}

// exitWithin waits until the process of pidfd fd has exited (a pidfd
// polls readable then), for at most d and not past ctx's deadline.
func exitWithin(ctx context.Context, fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	for {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds()))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return false
		}
		return n > 0
	}
}
