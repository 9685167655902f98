//go:build unix

package e2ekit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/internal/shim"

	"example.com/pifleet/internal/fsmkit/fsmtest"
)

// TestMain makes the test binary a shim when started as `e2ekit.test
// shim`, as the agent binary is one with `pifleet-agent shim`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(shim.Main(os.Args[2:]))
	}
	// Race-enabled children otherwise sleep a second before exiting.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	trace := fsmtest.StartTrace(fsmtest.Checks{}) // no event dropped silently
	os.Exit(trace.Check(m.Run()))
}

// wait bounds every wait on a process; it never paces a test.
const wait = 30 * time.Second

// agentDir is a state directory laid out as an agent's; short, because
// shim socket paths must be.
func agentDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "e2k")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, sub := range []string{workersDir, handlesDir} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startWorker starts `cat` under a shim the way an agent does, records
// its handle when withHandle, and detaches, as a killed agent would. It
// returns the shim's exit channel and the worker's pid.
func startWorker(t *testing.T, dir, id string, withHandle bool) (shimExited <-chan struct{}, workerPID int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := handle{InstanceID: id, Socket: filepath.Join(dir, workersDir, id+".sock"), Token: shim.NewToken()}
	c, err := shim.Start(t.Context(), shim.StartConfig{Executable: exe, Args: []string{"shim"},
		LogPath: filepath.Join(dir, workersDir, id+logSuffix),
		Shim:    shim.Config{InstanceID: id, Token: h.Token, Socket: h.Socket, Command: []string{"cat"}, Dir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a failed sweep still ends the shim
		if p, err := os.FindProcess(c.Attached().ShimPID); err == nil {
			p.Signal(syscall.SIGKILL)
		}
		<-c.ShimExited()
	})
	if withHandle {
		b, _ := json.Marshal(h)
		if err := os.WriteFile(filepath.Join(dir, handlesDir, id+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	return c.ShimExited(), c.Attached().WorkerPID
}

func sweep(t *testing.T, dir string) []Leftover {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	left, err := Sweep(ctx, dir)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return left
}

func waitEnded(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("%s still runs", what)
	}
}

// gone reports whether pid no longer exists (the shim reaps its worker
// before it reports the exit, so an ended shim's worker is gone).
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestSweepStopsARunningWorkerThroughItsHandle(t *testing.T) {
	dir := agentDir(t)
	exited, workerPID := startWorker(t, dir, "i-1", true)
	left := sweep(t, dir)
	if len(left) != 1 || left[0].InstanceID != "i-1" || !left[0].WorkerRunning || left[0].How != Stopped || left[0].ShimPID == 0 {
		t.Fatalf("leftovers %+v, want i-1's running worker stopped through its socket", left)
	}
	waitEnded(t, "the shim", exited)
	if !gone(workerPID) {
		t.Errorf("worker pid %d still exists", workerPID)
	}
	if again := sweep(t, dir); len(again) != 0 {
		t.Errorf("a second sweep found %+v", again)
	}
}

func TestSweepEndsAShimThatOnlyHoldsAnExit(t *testing.T) {
	dir := agentDir(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := handle{InstanceID: "i-2", Socket: filepath.Join(dir, workersDir, "i-2.sock"), Token: shim.NewToken()}
	c, err := shim.Start(t.Context(), shim.StartConfig{Executable: exe, Args: []string{"shim"},
		LogPath: filepath.Join(dir, workersDir, "i-2"+logSuffix),
		Shim:    shim.Config{InstanceID: h.InstanceID, Token: h.Token, Socket: h.Socket, Command: []string{"cat"}, Dir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(h)
	if err := os.WriteFile(filepath.Join(dir, handlesDir, "i-2.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The worker exits; nobody acknowledges its exit, so the shim stays.
	if err := c.CloseStdin(t.Context()); err != nil {
		t.Fatal(err)
	}
	for ev := range c.Events() {
		if ev.Kind == shim.EventExit {
			break
		}
	}
	c.Close()
	left := sweep(t, dir)
	if len(left) != 1 || left[0].WorkerRunning || left[0].How != Stopped {
		t.Fatalf("leftovers %+v, want i-2's lingering shim", left)
	}
	waitEnded(t, "the shim", c.ShimExited())
}

func TestSweepTerminatesAShimWithoutHandle(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("shims without a handle are found through /proc")
	}
	dir := agentDir(t)
	exited, workerPID := startWorker(t, dir, "i-3", false)
	left := sweep(t, dir)
	if len(left) != 1 || left[0].InstanceID != "i-3" || left[0].How != Terminated {
		t.Fatalf("leftovers %+v, want i-3's shim terminated", left)
	}
	waitEnded(t, "the shim", exited)
	if !gone(workerPID) {
		t.Errorf("worker pid %d still exists", workerPID)
	}
}

func TestSweepLeavesOtherDirectoriesAlone(t *testing.T) {
	mine, theirs := agentDir(t), agentDir(t)
	exited, _ := startWorker(t, theirs, "i-4", true)
	if left := sweep(t, mine); len(left) != 0 {
		t.Fatalf("swept %+v from another state directory", left)
	}
	select {
	case <-exited:
		t.Fatal("another state directory's shim ended")
	default:
	}
	if left := sweep(t, theirs); len(left) != 1 {
		t.Fatalf("leftovers %+v", left)
	}
	waitEnded(t, "the shim", exited)
}

func TestSweepFindsNothingWhereNothingRuns(t *testing.T) {
	dir := agentDir(t)
	// A handle whose shim is gone, and one that cannot be read.
	b, _ := json.Marshal(handle{InstanceID: "i-5", Socket: filepath.Join(dir, workersDir, "i-5.sock"), Token: "t"})
	if err := os.WriteFile(filepath.Join(dir, handlesDir, "i-5.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, handlesDir, "i-6.json"), []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if left := sweep(t, dir); len(left) != 0 {
		t.Errorf("leftovers %+v", left)
	}
	if left := sweep(t, filepath.Join(dir, "never-created")); len(left) != 0 {
		t.Errorf("leftovers in a missing directory %+v", left)
	}
}

// recorder is a testing.TB that keeps its errors and cleanups.
type recorder struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper()                   {}
func (r *recorder) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(f string, a ...any) { r.errors = append(r.errors, fmt.Sprintf(f, a...)) }

func TestCleanupWorkersFailsTheTestForEachLeftover(t *testing.T) {
	dir := agentDir(t)
	exited, _ := startWorker(t, dir, "i-7", true)
	r := &recorder{TB: t}
	CleanupWorkers(r, dir)
	if len(r.cleanups) != 1 || len(r.errors) != 0 {
		t.Fatalf("CleanupWorkers acted before the cleanup: %d cleanups, errors %q", len(r.cleanups), r.errors)
	}
	r.cleanups[0]()
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "the running worker i-7") {
		t.Errorf("errors %q, want one naming i-7's running worker", r.errors)
	}
	waitEnded(t, "the shim", exited)

	clean := &recorder{TB: t}
	CleanupWorkers(clean, agentDir(t))
	clean.cleanups[0]()
	if len(clean.errors) != 0 {
		t.Errorf("a clean directory failed the test: %q", clean.errors)
	}
}
