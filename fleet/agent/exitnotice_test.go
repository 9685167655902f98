//go:build linux

package agent

import (
	"syscall"
	"testing"

	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/transport"
)

// pifleetClient dials and introduces itself as a pifleet server.
func (h *harness) pifleetClient(t *testing.T) *client {
	c := h.dialPifleet(t)
	c.hello()
	return c
}

// A worker's end is told at once to every connected pifleet server with
// worker_exited (how it ended, whether it was asked for, its session
// file), to a server that connects later as well; a v1 server gets none
// (an unknown frame type to it) and reads the end in the instances
// listing.
func TestWorkerExitNotice(t *testing.T) {
	h := newHarness(t, hopts{})
	a := h.pifleetClient(t)
	v1 := h.dial(t)
	v1.hello()
	inst := a.mustSpawn("s1", h.cwd, "default", nil)
	other := a.mustSpawn("s2", h.cwd, "default", nil)
	// A tool that runs until the test is over: like pi's, it has a process
	// group of its own and outlives a worker killed with SIGKILL, so it
	// ends with the test's directory instead of minutes later.
	alive := t.TempDir()
	a.rpc(inst.InstanceID, "task-1", prompt("p1", "bash: while [ -d "+alive+" ]; do sleep 0.2; done"))
	a.nextEvent(inst.InstanceID, typeIs("agent_start"))

	_, workerPID, err := e2ekit.WorkerProcesses(h.cfg.StateDir, inst.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if inst.PID == nil || int(*inst.PID) != workerPID {
		t.Fatalf("the process tree's worker %d is not the spawned pid %v", workerPID, inst.PID)
	}
	if err := syscall.Kill(workerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n := nextOf(a, func(f *transport.WorkerExitedFrame) bool { return f.InstanceID == inst.InstanceID })
	if n.Expected || n.Signal != "KILL" || n.ExitCode != nil || n.State != transport.InstanceExited ||
		n.SessionPath == "" || n.TaskID != "task-1" || n.Lost {
		t.Errorf("notice %+v", n)
	}
	// The notice comes before the task's task_done.
	done := nextOf(a, func(f *transport.TaskDoneFrame) bool { return f.TaskID == "task-1" })
	if done.Status != transport.TaskAborted {
		t.Errorf("task_done %+v", done)
	}
	a.ack(done)

	st := &transport.StopFrame{InstanceID: other.InstanceID}
	st.ID = "stop"
	a.send(st)
	a.reply("stop")
	n = nil
	for _, f := range a.seen { // sent before the stop's answer
		if f, ok := f.(*transport.WorkerExitedFrame); ok && f.InstanceID == other.InstanceID {
			n = f
		}
	}
	if n == nil {
		t.Fatal("no notice of the stop before its answer")
	}
	if !n.Expected || n.State != transport.InstanceStopped || n.ExitCode == nil || *n.ExitCode != 0 {
		t.Errorf("notice of a stop %+v", n)
	}

	l := v1.roundTrip("l")
	for _, f := range v1.seen {
		if _, ok := f.(*transport.WorkerExitedFrame); ok {
			t.Errorf("a v1 server got %s", f.FrameType())
		}
	}
	states := map[string]transport.InstanceState{}
	for _, i := range l.Instances {
		states[i.InstanceID] = i.State
	}
	if states[inst.InstanceID] != transport.InstanceExited || states[other.InstanceID] != transport.InstanceStopped {
		t.Errorf("v1 listing %v", states)
	}

	// A server that was away hears of both.
	later := h.pifleetClient(t)
	got := map[string]bool{}
	for len(got) < 2 {
		f := nextOf(later, func(*transport.WorkerExitedFrame) bool { return true })
		got[f.InstanceID] = f.Expected
	}
	if got[inst.InstanceID] || !got[other.InstanceID] {
		t.Errorf("replayed notices (id → expected) %v", got)
	}
}
