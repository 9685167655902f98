package shim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A Start whose context ends after the worker started, before the shim
// was ready, leaves no worker running when it returns: the shim is asked
// to stop its worker and waited for, not killed and left to its watchdog,
// which takes the worker down only some time later.
func TestCancelledStartLeavesNoWorker(t *testing.T) {
	cancelled := 0
	for try := 0; try < 40 && cancelled < 10; try++ {
		up := filepath.Join(t.TempDir(), "up")
		if err := syscall.Mkfifo(up, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, "UP="+up)
		cfg.Command = shWorker(`echo $$ > "$UP"; exec sleep 600`)
		ctx, cancel := context.WithCancel(t.Context())
		type result struct {
			c   *Client
			err error
		}
		res := make(chan result, 1)
		go func() {
			c, err := Start(ctx, StartConfig{Executable: os.Args[0], Args: []string{"shim"}, Shim: cfg})
			res <- result{c, err}
		}()
		line, err := os.ReadFile(up) // the worker runs
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
		if err != nil {
			t.Fatalf("worker pid %q: %v", line, err)
		}
		cancel()
		r := <-res
		if r.err == nil { // the shim was ready first: not the case under test
			// Acknowledging the exit lets the shim finish now, not after
			// its linger (a minute in the tests' config).
			r.c.Stop(context.Background(), StopOptions{})
			expectExit(t, r.c, cfg)
			r.c.Close()
			<-r.c.ShimExited()
			continue
		}
		cancelled++
		if running(pid) {
			t.Fatalf("try %d: worker %d still runs after the cancelled Start returned (%v)", try, pid, r.err)
		}
	}
	if cancelled == 0 {
		t.Skip("no Start was cancelled before its shim was ready")
	}
}

// running reports whether pid is a live process (not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z"))
}
