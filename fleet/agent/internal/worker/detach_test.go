//go:build unix

package worker

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestDetachAfterExit detaches a worker whose process has exited and
// whose exit was taken from Events, while its shim process, done serving,
// has not gone away yet: Detach must not wait for it.
func TestDetachAfterExit(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	if err := syscall.Mkfifo(release, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := helperSpec(t, "crasher")
	spec.ShimCommand = []string{os.Args[0], "lingering-shim", release}
	w := start(t, spec)
	defer releaseShim(t, w, release)
	s := newStream(t, w)
	prompt(t, w, "p1", "anything")
	s.until(func(ev Event) bool { return ev.Exit != nil })
	// The exit is acknowledged: the shim stops serving, and its client's
	// events end; the shim process stays until released.
	g := w.gen
	for range g.c.Events() {
	}

	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	detached := make(chan struct{})
	go func() {
		w.Detach()
		close(detached)
	}()
	select {
	case <-detached:
	case <-ctx.Done():
		t.Fatalf("Detach of an exited worker did not return within %v", waitLimit)
	}
	select {
	case <-w.Done():
	case <-ctx.Done():
		t.Fatalf("Done not closed within %v of Detach", waitLimit)
	}
	select {
	case <-g.c.ShimExited():
		t.Fatal("the shim was gone already: the test did not hold it")
	default:
	}
}

// releaseShim lets a lingering shim go and waits until it is reaped.
func releaseShim(t *testing.T, w *Worker, release string) {
	t.Helper()
	opened := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(release, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("the lingering shim did not wait for its release within %v", waitLimit)
	}
	waitShimGone(t, w)
}

// TestStopLeavesNothingRunning checks that Stop returns only once the
// Worker has let go of everything: its goroutines ended (Done) and its
// shim process reaped.
func TestStopLeavesNothingRunning(t *testing.T) {
	w := start(t, helperSpec(t, "toy"))
	drained := make(chan struct{})
	go func() { // Stop needs the stream to flow
		for range w.Events() {
		}
		close(drained)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if _, err := w.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-w.Done():
	default:
		t.Error("Done not closed when Stop returned")
	}
	select {
	case <-w.gen.c.ShimExited():
	default:
		t.Error("shim process not reaped when Stop returned")
	}
	<-drained
}
