//go:build unix

package worker

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/rs/zerolog"

	"example.com/pifleet/internal/pitest"
)

// OnLaunch gets the handle of a shim before the shim exists, and that
// handle is enough for Discard to end the worker and its shim for good
// (what a restarted agent does with a spawn it did not finish). A second
// Discard finds no shim.
func TestOnLaunchHandleLetsDiscardEndTheWorker(t *testing.T) {
	spec := piSpec(t, pitest.Scripted, pitest.Options{})
	var handles []Persisted
	spec.OnLaunch = func(p Persisted) error {
		if _, err := os.Stat(p.Socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("OnLaunch called with the socket already there: %v", err)
		}
		handles = append(handles, p)
		return nil
	}
	w := start(t, spec)
	if len(handles) != 1 {
		t.Fatalf("OnLaunch called %d times for one Start", len(handles))
	}
	if p := w.Persisted(); p.Socket != handles[0].Socket || p.Token != handles[0].Token {
		t.Fatalf("OnLaunch handle %+v, the worker's %+v", handles[0], p)
	}
	pid := w.Snapshot().Pid
	w.Detach() // the agent is gone; the worker runs on under its shim

	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := Discard(ctx, handles[0], spec.StopGrace, zerolog.Nop()); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	waitShimGone(t, w)
	if alive(pid) {
		t.Errorf("worker %d still alive after Discard", pid)
	}
	if err := Discard(ctx, handles[0], spec.StopGrace, zerolog.Nop()); !errors.Is(err, ErrGone) {
		t.Errorf("second Discard: %v, want ErrGone", err)
	}
}

// An OnLaunch that fails (the handle cannot be stored) stops the start
// before any process runs.
func TestOnLaunchErrorStartsNothing(t *testing.T) {
	spec := piSpec(t, pitest.Scripted, pitest.Options{})
	full := errors.New("no space left on device")
	var socket string
	spec.OnLaunch = func(p Persisted) error { socket = p.Socket; return full }
	if _, err := Start(t.Context(), spec); !errors.Is(err, full) {
		t.Fatalf("Start: %v, want the OnLaunch error", err)
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a shim socket exists after a refused launch: %v", err)
	}
}
