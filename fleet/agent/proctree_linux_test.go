//go:build linux

package agent

import (
	"errors"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/internal/e2ekit"
)

// strays are the live processes below this test process that are not
// below one of the keep pids (a live agent, and the processes it owns).
func strays(keep ...int) []e2ekit.Proc {
	owned := map[int]bool{}
	for _, k := range keep {
		owned[k] = true
		for _, d := range e2ekit.Descendants(k) {
			owned[d.PID] = true
		}
	}
	var out []e2ekit.Proc
	for _, p := range e2ekit.Descendants(os.Getpid()) {
		if !owned[p.PID] && p.State != 'Z' {
			out = append(out, p)
		}
	}
	return out
}

// reapOrphans waits for the processes that were reparented to this test
// (their agent was killed; see e2ekit.BecomeSubreaper) and are on their
// way out, and fails the test with those still alive after waitLimit: a
// worker (or its shim) that nobody owns any more. The processes of keep
// are left alone.
func reapOrphans(t *testing.T, keep ...int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for _, p := range strays(keep...) {
		if p.PPID != os.Getpid() {
			continue // a grandchild: reaped by its own parent
		}
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			var ws syscall.WaitStatus
			for {
				if _, err := syscall.Wait4(p.PID, &ws, 0, nil); !errors.Is(err, syscall.EINTR) {
					return
				}
			}
		}()
		select {
		case <-ended:
		case <-time.After(time.Until(deadline)):
		}
	}
	// Zombies the strays' own ends left are reaped now.
	for _, p := range e2ekit.Descendants(os.Getpid()) {
		if p.State == 'Z' && p.PPID == os.Getpid() && !slices.Contains(keep, p.PID) {
			var ws syscall.WaitStatus
			syscall.Wait4(p.PID, &ws, syscall.WNOHANG, nil)
		}
	}
	if s := strays(keep...); len(s) > 0 {
		t.Errorf("processes nobody owns are still running: %v", s)
		for _, p := range s {
			if p.PPID == os.Getpid() {
				// Not left for the next tests: its watchdog takes the
				// worker's group down with it.
				syscall.Kill(p.PID, syscall.SIGKILL)
				var ws syscall.WaitStatus
				syscall.Wait4(p.PID, &ws, 0, nil)
			}
		}
	}
}

// liveDescendants are the pids of the live processes below this test.
func liveDescendants() []int {
	var pids []int
	for _, p := range e2ekit.Descendants(os.Getpid()) {
		if p.State != 'Z' {
			pids = append(pids, p.PID)
		}
	}
	return pids
}
