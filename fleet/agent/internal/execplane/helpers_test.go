package execplane

import (
	"errors"

	"encoding/base64"
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/transport"
)

// collector is a Sender that keeps every frame in order.
type collector struct {
	frames chan transport.Frame
}

func newCollector() *collector { return &collector{frames: make(chan transport.Frame, 4096)} }

func (c *collector) send(f transport.Frame) { c.frames <- f }

// result is what an execution sent, read until its exit.
type result struct {
	outputs []*transport.ExecOutputFrame
	exit    *transport.ExecExitFrame
}

func (r result) stream(s transport.Stream) string {
	var b strings.Builder
	for _, o := range r.outputs {
		if o.Stream == s {
			raw, _ := base64.StdEncoding.DecodeString(o.Base64)
			b.Write(raw)
		}
	}
	return b.String()
}

func (c *collector) wait(t *testing.T) result {
	t.Helper()
	var r result
	timeout := time.After(30 * time.Second)
	for {
		select {
		case f := <-c.frames:
			switch f := f.(type) {
			case *transport.ExecOutputFrame:
				r.outputs = append(r.outputs, f)
			case *transport.ExecExitFrame:
				r.exit = f
				return r
			}
		case <-timeout:
			t.Fatalf("no exit; %d outputs so far", len(r.outputs))
		}
	}
}

func newManager(t *testing.T, mut func(*Config)) (*Manager, string) {
	t.Helper()
	audit := filepath.Join(t.TempDir(), "state", "exec-audit.jsonl")
	// bash without -l: a login shell's profile on a shared test machine
	// can take a minute (pyenv's rehash lock); the default is tested apart.
	cfg := Config{AuditFile: audit, Shell: []string{"/bin/bash", "-c"}}
	if mut != nil {
		mut(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, audit
}

// run starts req and returns what it sent.
func run(t *testing.T, m *Manager, req Request) (result, *Execution) {
	t.Helper()
	c := newCollector()
	e, err := m.Start(req, c.send)
	if err != nil {
		t.Fatal(err)
	}
	e.Run()
	return c.wait(t), e
}

func seconds(s float64) *float64 { return &s }

// gone waits (on a pidfd, up to 10 s) until pid has ended; a process
// that is not ours is reaped by init, so ended means exited or zombie.
func gone(t *testing.T, pid int) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 1 || !alive(pid)
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE …: a zombie is dead already, only unreaped.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
