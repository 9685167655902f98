package e2ekit

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
)

// SmallDisk mounts a tmpfs of size (a mount option, such as "8m") for the
// test and unmounts it at cleanup, so that a test can fill a disk without
// filling the machine's. It needs root (as CI runs); where mounting is not
// permitted the test is skipped, saying why.
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pfd")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		os.Remove(dir)
		t.Skipf("a full disk needs a small tmpfs, and mounting one is not permitted here: %v", err)
	}
	t.Cleanup(func() {
		syscall.Unmount(dir, syscall.MNT_DETACH)
		os.Remove(dir)
	})
	return dir
}

// FillDisk fills the file system of dir to the last byte and returns the
// function that frees the space again.
func FillDisk(t testing.TB, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for len(chunk) > 0 {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			chunk = chunk[:len(chunk)/2] // the last partial pages too
		}
	}
	return func() {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// Proc is one process as /proc shows it.
type Proc struct {
	PID, PPID int
	// State is the one-letter state of /proc/<pid>/stat ('Z': a zombie).
	State byte
	// Cmdline is the command line, its arguments joined by spaces.
	Cmdline string
	// Stderr is where its stderr goes (a shim's is its instance's log).
	Stderr string
}

func (p Proc) String() string { return fmt.Sprintf("%d (%c, %.60s)", p.PID, p.State, p.Cmdline) }

// Descendants lists, by pid, every process whose chain of parents reaches
// root: the process tree, never process names. A killed agent's shims
// are reparented away from it; see BecomeSubreaper to keep them below a
// test.
func Descendants(root int) []Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	all := map[int]Proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stderr, _ := os.Readlink(filepath.Join("/proc", e.Name(), "fd", "2"))
		all[pid] = Proc{PID: pid, PPID: ppid, State: f[0][0], Stderr: stderr,
			Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))}
	}
	var out []Proc
	for pid, p := range all {
		for q, hops := p, 0; q.PPID != 0 && hops < len(all); q, hops = all[q.PPID], hops+1 {
			if q.PPID == root {
				out = append(out, all[pid])
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b Proc) int { return a.PID - b.PID })
	return out
}

// BecomeSubreaper makes the calling process the child subreaper of its
// descendants until the test ends: a process orphaned below it (the shim
// of a killed agent) becomes its child instead of init's, so that
// Descendants still shows it. Reap such children by pid (syscall.Wait4),
// never with -1, which would take exits os/exec waits for. The test is
// skipped where the kernel refuses.
func BecomeSubreaper(t testing.TB) {
	t.Helper()
	const prSetChildSubreaper = 36
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		t.Skipf("cannot become a child subreaper (prctl: %v): the process-tree check needs it", e)
	}
	t.Cleanup(func() { syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0) })
}
