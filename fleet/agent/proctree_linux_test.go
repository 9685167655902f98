//go:build linux

package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is one process as /proc/<pid>/stat tells it.
type proc struct {
	pid, ppid int
	state     byte
	comm      string
}

func (p proc) String() string { return fmt.Sprintf("%d(%s,%c)", p.pid, p.comm, p.state) }

// processes reads every process of the machine.
func processes(t *testing.T) map[int]proc {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]proc, len(dirs))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		f := strings.Fields(s[end+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out[pid] = proc{pid: pid, ppid: ppid, state: f[0][0], comm: s[open+1 : end]}
	}
	return out
}

// descendants lists the processes below root, by parent links.
func descendants(all map[int]proc, root int) []proc {
	var out []proc
	next := []int{root}
	for len(next) > 0 {
		p := next[0]
		next = next[1:]
		for _, q := range all {
			if q.ppid == p {
				out = append(out, q)
				next = append(next, q.pid)
			}
		}
	}
	slices.SortFunc(out, func(a, b proc) int { return a.pid - b.pid })
	return out
}

// adoptOrphans makes this test process the subreaper of its descendants
// for the test's duration: a shim orphaned by a killed agent becomes the
// test's child instead of init's, so that the process tree still shows
// it (by parent link, never by name).
func adoptOrphans(t *testing.T) {
	t.Helper()
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		t.Skipf("cannot become a child subreaper (prctl: %v): the process-tree check needs it", e)
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
}

// strays are the live processes below this test process that are not
// below one of the keep pids (a live agent, and the processes it owns).
func strays(t *testing.T, keep ...int) []proc {
	t.Helper()
	all := processes(t)
	owned := map[int]bool{}
	for _, k := range keep {
		owned[k] = true
		for _, d := range descendants(all, k) {
			owned[d.pid] = true
		}
	}
	var out []proc
	for _, p := range descendants(all, os.Getpid()) {
		if !owned[p.pid] && p.state != 'Z' && !owned[p.ppid] {
			out = append(out, p)
		}
	}
	return out
}

// reapOrphans waits for the processes that were reparented to this test
// (their agent was killed) and are on their way out, and fails the test
// with those still alive after waitLimit: a worker (or its shim) that
// nobody owns any more. The processes of keep are left alone.
func reapOrphans(t *testing.T, keep ...int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	left := strays(t, keep...)
	for _, p := range left {
		if p.ppid != os.Getpid() {
			continue // a grandchild: reaped by its own parent
		}
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			var ws syscall.WaitStatus
			for {
				_, err := syscall.Wait4(p.pid, &ws, 0, nil)
				if !errors.Is(err, syscall.EINTR) {
					return
				}
			}
		}()
		select {
		case <-ended:
		case <-time.After(time.Until(deadline)):
		}
	}
	// Zombies left by the stray processes' own ends are reaped now.
	for _, p := range descendants(processes(t), os.Getpid()) {
		if p.state == 'Z' && p.ppid == os.Getpid() && !slices.Contains(keep, p.pid) {
			var ws syscall.WaitStatus
			syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
		}
	}
	if s := strays(t, keep...); len(s) > 0 {
		t.Errorf("processes nobody owns are still running: %v", s)
		for _, p := range s {
			if p.ppid == os.Getpid() {
				// Not left for the next tests: its watchdog takes the
				// worker's group down with it.
				syscall.Kill(p.pid, syscall.SIGKILL)
				var ws syscall.WaitStatus
				syscall.Wait4(p.pid, &ws, 0, nil)
			}
		}
	}
}
