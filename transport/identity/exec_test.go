//go:build unix

package identity

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FakeTailscale installs a stand-in `tailscale` CLI, first on PATH, that
// replays the recorded output in testdata. tailscaled cannot run here, so
// this is the one fake: a real process, so that exec, exit codes and the
// timeout are exercised for real.
//
//	version              prints a version
//	ip -4                prints testdata/ip-4.txt
//	status --json        prints testdata/status.json
//	whois --json IP      100.87.12.34: testdata/whois-buildbox.json;
//	                     100.64.0.99: writes its pid to the FIFO hungPID
//	                     and hangs (exec sleep, so the pid is the hung
//	                     process itself);
//	                     anything else: "peer not found", exit 1
//
// It returns the script's path and the FIFO's path; a test learns that the
// hung process is up by reading the FIFO, which blocks until it is.
func FakeTailscale(t *testing.T) (bin, hungPID string) {
	t.Helper()
	data, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin = filepath.Join(dir, "tailscale")
	hungPID = filepath.Join(dir, "hung.pid")
	if err := syscall.Mkfifo(hungPID, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
# FakeTailscale: replays recorded tailscale CLI output for pifleet tests.
case "$1" in
version) echo "1.80.3"; echo "  tailscale commit: fake" ;;
ip) cat 'DATA/ip-4.txt' ;;
status) cat 'DATA/status.json' ;;
whois)
	case "$3" in
	100.87.12.34) cat 'DATA/whois-buildbox.json' ;;
	100.64.0.99) echo $$ > 'PIDFILE'; exec sleep 60 ;;
	*) echo "peer not found: $3" >&2; exit 1 ;;
	esac ;;
*) echo "unknown command: $1" >&2; exit 2 ;;
esac
`
	script = strings.NewReplacer("DATA", data, "PIDFILE", hungPID).Replace(script)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return bin, hungPID
}

// readPID reads the hung process's pid from the FIFO (blocking until the
// process writes it).
func readPID(t *testing.T, fifo string) int {
	t.Helper()
	raw, err := os.ReadFile(fifo)
	if err != nil {
		t.Errorf("reading the hung process's pid: %v", err)
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Errorf("bad pid %q: %v", raw, err)
	}
	return pid
}

// assertGone checks that pid no longer exists: the call returned only
// after the process was killed and reaped.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("hung tailscale (pid %d) still exists: kill(0) = %v", pid, err)
	}
}

func TestFakeTailscaleRealProcess(t *testing.T) {
	bin, _ := FakeTailscale(t)
	ts := &Tailscale{} // the zero value: real lookup, real exec

	found, err := ts.FindBinary(t.Context())
	if err != nil || found != bin {
		t.Fatalf("FindBinary = %q, %v; want the fake on PATH %q", found, err, bin)
	}

	id, err := ts.Whois(t.Context(), netip.MustParseAddr("::ffff:100.87.12.34"))
	if err != nil || id != (Identity{Machine: "buildbox", User: "ana@github"}) {
		t.Errorf("Whois = %+v, %v", id, err)
	}

	ip, err := ts.IPv4(t.Context())
	if err != nil || ip != netip.MustParseAddr("100.87.12.34") {
		t.Errorf("IPv4 = %v, %v", ip, err)
	}

	st, err := ts.Status(t.Context())
	if err != nil || !st.Running() || len(st.Peers) != 3 {
		t.Errorf("Status = %+v, %v", st, err)
	}

	_, err = ts.Whois(t.Context(), netip.MustParseAddr("100.64.0.7"))
	ce, ok := errors.AsType[*CommandError](err)
	if !ok || ce.ExitCode != 1 || ce.Stderr != "peer not found: 100.64.0.7" || ce.Err != nil {
		t.Errorf("unknown peer: err = %#v", err)
	}
}

func TestFakeTailscaleTimeoutKillsTheProcess(t *testing.T) {
	_, fifo := FakeTailscale(t)
	ts := &Tailscale{Timeout: 300 * time.Millisecond}
	if _, err := ts.FindBinary(t.Context()); err != nil {
		t.Fatal(err) // look up outside the timed call
	}
	pid := make(chan int, 1)
	go func() { pid <- readPID(t, fifo) }()

	_, err := ts.Whois(t.Context(), netip.MustParseAddr("100.64.0.99"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "tailscale whois --json 100.64.0.99 failed") {
		t.Errorf("message %q does not name the command", err)
	}
	assertGone(t, <-pid)
}

func TestFakeTailscaleCallerCancel(t *testing.T) {
	_, fifo := FakeTailscale(t)
	ts := &Tailscale{Timeout: time.Hour} // only the caller's cancel ends it
	if _, err := ts.FindBinary(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := ts.Whois(ctx, netip.MustParseAddr("100.64.0.99"))
		done <- err
	}()
	pid := readPID(t, fifo) // the process is up and hanging
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want Canceled", err)
	}
	assertGone(t, pid)
}

func TestFakeTailscaleBrokenBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tailscale")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'tailscaled not installed' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	ts := &Tailscale{exists: func(string) bool { return false }} // no fallbacks here
	if _, err := ts.IPv4(t.Context()); !errors.Is(err, ErrTailscaleNotFound) {
		t.Errorf("err = %v, want ErrTailscaleNotFound", err)
	}

	ts = &Tailscale{Binary: filepath.Join(dir, "missing")}
	_, err := ts.IPv4(t.Context())
	if ce, ok := errors.AsType[*CommandError](err); !ok || ce.Err == nil {
		t.Errorf("missing binary: err = %#v, want *CommandError with a start error", err)
	}
}
