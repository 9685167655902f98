//go:build linux

package worker

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/internal/e2ekit"
)

// The ends of a worker that nobody asked for, each from a real kill -9:
// of the worker process while it is idle (exited), and of its shim in
// every live state (lost: the shim vanished without reporting an exit).

// agentSpec is helperSpec with the state directory laid out as an agent
// lays it out (workers/ under its state directory), so that
// e2ekit.WorkerProcesses finds the shim through the process tree.
func agentSpec(t *testing.T, role string) (Spec, string) {
	spec := helperSpec(t, role)
	spec.StateDir = filepath.Join(stateDir(t), "workers")
	if err := os.Mkdir(spec.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	return spec, filepath.Dir(spec.StateDir)
}

// killShim kills the shim of instance id with SIGKILL.
func killShim(t *testing.T, agentDir, id string) {
	t.Helper()
	shimPID, workerPID, err := e2ekit.WorkerProcesses(agentDir, id)
	if err != nil {
		t.Fatal(err)
	}
	// The watchdog ends the worker's group after the spec's grace; a test
	// whose grace outlasts it (a stubborn worker, a long StopGrace) would
	// leave the group behind, so the test ends it while it is still the
	// worker's.
	if pgid, err := syscall.Getpgid(workerPID); err == nil {
		t.Cleanup(func() {
			if now, err := syscall.Getpgid(workerPID); err == nil && now == pgid {
				syscall.Kill(-pgid, syscall.SIGKILL)
			}
		})
	}
	if err := syscall.Kill(shimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// lostExit reads the stream to its end and checks that it ended with a
// lost exit and the worker in state lost.
func lostExit(t *testing.T, w *Worker, s *stream, duringRun bool) {
	t.Helper()
	evs := s.drain()
	waitDone(t, w)
	x := evs[len(evs)-1].Exit
	if x == nil || !x.Lost || x.DuringRun != duringRun {
		t.Fatalf("last event %+v, want a lost exit (during a run: %v)", evs[len(evs)-1], duringRun)
	}
	if st := w.Snapshot().State; st != StateLost {
		t.Errorf("state = %s, want lost", st)
	}
}

func TestWorkerKilledWhileIdleExits(t *testing.T) {
	w := start(t, helperSpec(t, "toy"))
	s := newStream(t, w)
	if err := syscall.Kill(w.Snapshot().Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	evs := s.drain()
	waitDone(t, w)
	if x := evs[len(evs)-1].Exit; x == nil || x.Signal != "KILL" || x.DuringRun || x.Lost {
		t.Fatalf("last event %+v, want an exit by SIGKILL outside a run", evs[len(evs)-1])
	}
	if st := w.Snapshot().State; st != StateExited {
		t.Errorf("state = %s, want exited", st)
	}
}

func TestShimKilledBeforeTheFirstGetState(t *testing.T) {
	spec, agentDir := agentSpec(t, "mute")
	wit := newWitness(t)
	spec.Env = append(spec.Env, "WITNESS="+wit.path)
	errc := make(chan error, 1)
	go func() {
		w, err := Start(t.Context(), spec)
		if w != nil {
			w.Stop(t.Context())
		}
		errc <- err
	}()
	select {
	case <-wit.opened:
	case err := <-errc:
		t.Fatalf("Start of a mute worker returned: %v", err)
	case <-time.After(waitLimit):
		t.Fatal("the mute worker never started")
	}
	killShim(t, agentDir, spec.InstanceID)
	var serr *StartError
	select {
	case err := <-errc:
		if !errors.As(err, &serr) || !serr.Exit.Lost {
			t.Fatalf("Start = %v, want a *StartError of a lost shim", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Start still waits for the first get_state of a worker whose shim is gone")
	}
	wit.wait(t, wit.gone, "released: the worker outlived its shim")
}

func TestShimKilledWhileIdle(t *testing.T) {
	spec, agentDir := agentSpec(t, "toy")
	w := start(t, spec)
	s := newStream(t, w)
	killShim(t, agentDir, spec.InstanceID)
	lostExit(t, w, s, false)
}

func TestShimKilledDuringARun(t *testing.T) {
	spec, agentDir := agentSpec(t, "stubborn")
	wit := newWitness(t)
	spec.Env = append(spec.Env, "WITNESS="+wit.path)
	w := start(t, spec)
	wit.wait(t, wit.opened, "opened by the worker's child")
	s := newStream(t, w)
	prompt(t, w, "p1", "work") // a run the worker never ends
	s.until(isKind("agent_start"))
	killShim(t, agentDir, spec.InstanceID)
	lostExit(t, w, s, true)
	// The shim's watchdog ends the worker's process group.
	wit.wait(t, wit.gone, "released: the worker's group outlived its shim")
}

func TestShimKilledWhileStopping(t *testing.T) {
	spec, agentDir := agentSpec(t, "stubborn")
	spec.StopGrace = time.Hour // the stop waits; the shim dies first
	aborted := newWitness(t)
	spec.Env = append(spec.Env, "ABORTED="+aborted.path)
	w := start(t, spec)
	s := newStream(t, w)
	prompt(t, w, "p1", "work")
	s.until(isKind("agent_start"))
	stopped := make(chan error, 1)
	go func() {
		_, err := w.Stop(t.Context())
		stopped <- err
	}()
	aborted.wait(t, aborted.opened, "sent the abort of the stop")
	if st := w.Snapshot().State; st != StateStopping {
		t.Fatalf("state = %s after Stop sent its abort, want stopping", st)
	}
	killShim(t, agentDir, spec.InstanceID)
	lostExit(t, w, s, true)
	select {
	case <-stopped:
	case <-time.After(waitLimit):
		t.Fatal("Stop still waits for a worker whose shim is gone")
	}
}
