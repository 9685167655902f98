//go:build linux

package fleet_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// Every live state of an instance can end with its worker (InstanceTable's
// workerGone edges), and a stop is accepted from every state where one
// makes sense. Each case below brings an instance of the real agent,
// running the scripted worker, into one state and ends it there: the
// worker process is killed (kill -9 of the pid found through the process
// tree), or the application stops it.
func TestEveryLiveStateEndsWithItsWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	publish(t, reg, "strict", `{"review":{"maxRejects":0}}`)
	var stateDir string
	addr, ps := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) { stateDir = c.StateDir })
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)

	spawn := func(t *testing.T, bundle string) *fleet.Instance {
		t.Helper()
		inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: bundle})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	// transition waits for inst's transition ev out of from.
	transition := func(t *testing.T, inst *fleet.Instance, ev fleet.InstanceEvent, from fleet.InstanceState) {
		t.Helper()
		tf.waitChange(t, string(ev)+" from "+string(from), func(c fleet.Change) bool {
			return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.Event == string(ev) && c.From == string(from)
		})
	}
	kill := func(t *testing.T, inst *fleet.Instance) {
		t.Helper()
		_, workerPID, err := e2ekit.WorkerProcesses(stateDir, inst.ID())
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(workerPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	mustState := func(t *testing.T, inst *fleet.Instance, want fleet.InstanceState) {
		t.Helper()
		if st := inst.State(); st != want {
			t.Fatalf("state %s, want %s", st, want)
		}
	}
	// done submits a task that finishes at once and waits for its review.
	done := func(t *testing.T, inst *fleet.Instance) *fleet.Task {
		t.Helper()
		task, err := inst.Submit(t.Context(), "say: done", fleet.PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := tf.report(t); r.TaskID != task.ID() {
			t.Fatalf("report %+v, want task %s", r, task.ID())
		}
		mustState(t, inst, fleet.StateAwaitingReview)
		return task
	}
	review := func(t *testing.T, task *fleet.Task) {
		t.Helper()
		if err := task.StartReview(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	escalate := func(t *testing.T, task *fleet.Task) {
		t.Helper()
		if esc, err := task.Reject(t.Context(), "no"); err != nil || !esc {
			t.Fatalf("Reject = %v, %v; want escalated (maxRejects 0)", esc, err)
		}
	}
	stop := func(t *testing.T, inst *fleet.Instance) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		if err := inst.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		mustState(t, inst, fleet.StateStopped)
	}

	t.Run("killed while idle", func(t *testing.T) {
		inst := spawn(t, "plain")
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateIdle)
	})
	t.Run("killed while awaiting review", func(t *testing.T) {
		inst := spawn(t, "plain")
		done(t, inst)
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateAwaitingReview)
	})
	t.Run("killed while verifying", func(t *testing.T) {
		inst := spawn(t, "plain")
		review(t, done(t, inst))
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateVerifying)
	})
	t.Run("killed while escalated", func(t *testing.T) {
		inst := spawn(t, "strict")
		escalate(t, done(t, inst))
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateEscalated)
	})
	t.Run("killed while aborting", func(t *testing.T) {
		inst := spawn(t, "plain")
		if _, err := inst.PromptAsync(t.Context(), "/faux-ui", fleet.PromptOptions{}); err != nil {
			t.Fatal(err)
		}
		tf.waitChange(t, "the command's dialog", func(c fleet.Change) bool {
			return c.Kind == fleet.ChangeUIRequest && c.InstanceID == inst.ID()
		})
		if err := inst.Abort(t.Context()); err != nil { // the dialog does not end
			t.Fatal(err)
		}
		mustState(t, inst, fleet.StateAborting)
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateAborting)
	})
	t.Run("stopped while running", func(t *testing.T) {
		inst := spawn(t, "plain")
		if _, err := inst.PromptAsync(t.Context(), "delay: 120000\nsay: never said", fleet.PromptOptions{}); err != nil {
			t.Fatal(err)
		}
		mustState(t, inst, fleet.StateRunning)
		stop(t, inst)
		transition(t, inst, fleet.EventStopRequested, fleet.StateRunning)
	})
	t.Run("stopped while awaiting review", func(t *testing.T) {
		inst := spawn(t, "plain")
		done(t, inst)
		stop(t, inst)
		transition(t, inst, fleet.EventStopRequested, fleet.StateAwaitingReview)
	})
	t.Run("stopped while verifying", func(t *testing.T) {
		inst := spawn(t, "plain")
		review(t, done(t, inst))
		stop(t, inst)
		transition(t, inst, fleet.EventStopRequested, fleet.StateVerifying)
	})
	t.Run("stopped while escalated", func(t *testing.T) {
		inst := spawn(t, "strict")
		escalate(t, done(t, inst))
		stop(t, inst)
		transition(t, inst, fleet.EventStopRequested, fleet.StateEscalated)
	})
}
