//go:build linux

package fleet_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// A rejection that an older server recorded but never sent waits in
// revising until the reconnect delivers it (issue 12, "stopping always
// works" and "every edge is real"). The state file is the one a server
// killed right after recording the rejection leaves (instance and task
// revising, the feedback pending); a new server starts from it and dials
// the real agent. The worker is frozen (SIGSTOP), so it cannot answer the
// reconnect's get_state, and the feedback cannot be delivered: the
// instance stays revising with its agent connected. From there:
//
//   - the application stops it: the stop is accepted, the task ends
//     stopped with its feedback never delivered, and the agent kills the
//     worker that does not hear the stop (stopped, forced);
//   - the worker dies (kill -9): the agent's exit notice ends the instance
//     and the task ends aborted.
func TestARejectionWaitingForItsDeliveryCanEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	var stateDir string
	addr, ps := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) { stateDir = c.StateDir })
	agents := []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}}

	// revising returns a fleet restarted from a state file whose instance
	// waits in revising, its worker frozen, and the instance and task.
	revising := func(t *testing.T) (*testFleet, *fleet.Instance, *fleet.Task, int) {
		t.Helper()
		state := t.TempDir()
		tf := startFleet(t, state, reg, agents)
		tf.waitAgent(t, "worker-01", transport.StateEstablished)
		inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain"})
		if err != nil {
			t.Fatal(err)
		}
		task, err := inst.Submit(t.Context(), "say: done", fleet.PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := tf.report(t); r.TaskID != task.ID() {
			t.Fatalf("report %+v, want task %s", r, task.ID())
		}
		if err := task.StartReview(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := tf.Close(); err != nil {
			t.Fatal(err)
		}

		// What a server killed right after recording the rejection
		// leaves: one transaction moved the task and the instance to
		// revising with the feedback pending; its send never happened.
		rewriteStored(t, state, task.ID(), inst.ID(), func(tr *serverstore.Task) {
			tr.State, tr.Rejects = string(fleet.TaskRevising), 1
			tr.Feedback = append(tr.Feedback, serverstore.Feedback{At: time.Now(), Text: "add the tests", By: "application"})
		}, fleet.StateRevising)

		_, workerPID, err := e2ekit.WorkerProcesses(stateDir, inst.ID())
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(workerPID, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		tf2 := tf.startAgain(t)
		tf2.waitAgent(t, "worker-01", transport.StateEstablished)
		inst2, err := tf2.Instance(inst.ID())
		if err != nil {
			t.Fatal(err)
		}
		// The frozen worker answers no get_state: nothing delivers the
		// feedback, and the instance waits in revising.
		if st := inst2.State(); st != fleet.StateRevising {
			t.Fatalf("restored instance %s, want revising", st)
		}
		task2, err := tf2.Task(task.ID())
		if err != nil {
			t.Fatal(err)
		}
		return tf2, inst2, task2, workerPID
	}
	endReason := func(tf *testFleet, id string) string {
		for _, i := range tf.Status(t.Context()).Instances {
			if i.InstanceID == id {
				return i.EndReason
			}
		}
		return ""
	}

	t.Run("stopped", func(t *testing.T) {
		tf, inst, task, _ := revising(t)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		if err := inst.Stop(ctx); err != nil {
			t.Fatalf("Stop in revising: %v", err)
		}
		if st := inst.State(); st != fleet.StateStopped {
			t.Errorf("state %s, want stopped", st)
		}
		// The frozen worker did not hear the stop: the agent killed it
		// after its grace period.
		if r := endReason(tf, inst.ID()); r != "forced" {
			t.Errorf("end reason %q, want forced", r)
		}
		info := task.Info()
		if info.State != fleet.TaskStopped {
			t.Errorf("task %s, want stopped", info.State)
		}
		if n := len(info.Feedback); n != 1 || info.Feedback[0].Delivered {
			t.Errorf("feedback %+v, want the one rejection, never delivered", info.Feedback)
		}
	})

	t.Run("worker killed", func(t *testing.T) {
		tf, inst, task, workerPID := revising(t)
		if err := syscall.Kill(workerPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		tf.waitChange(t, "the worker gone in revising", func(c fleet.Change) bool {
			return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() &&
				c.Event == string(fleet.EventWorkerGone) && c.From == string(fleet.StateRevising)
		})
		if info := task.Info(); info.State != fleet.TaskAborted {
			t.Errorf("task %s, want aborted", info.State)
		}
		if st := inst.State(); st != fleet.StateStopped {
			t.Errorf("state %s, want stopped", st)
		}
		// The exit notice says how it ended; the reconnect's listing, when
		// it reaches the server first, that it exited.
		if r := endReason(tf, inst.ID()); !strings.Contains(r, "signal KILL") && !strings.Contains(r, "agent reports it exited") {
			t.Errorf("end reason %q, want the worker killed", r)
		}
	})
}
