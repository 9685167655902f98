package fleet_test

import (
	"errors"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/netfault"
)

// TestATrackedPromptLostInFlightEndsItsTask (#16 defect 2): the proxy
// holds the rpc with the prompt, then resets the connection, so the
// worker never gets it. After the reconnect the worker is idle and never
// started a run: the task ends failed (it used to stay running forever),
// Task.Wait says why, and the instance takes a new task.
func TestATrackedPromptLostInFlightEndsItsTask(t *testing.T) {
	tf, peer, proxy := proxiedFleet(t)
	inst := spawn(t, tf, "box")

	proxy.Stall(netfault.Upstream) // the server's frames stop in the proxy
	task, err := inst.Submit(t.Context(), "work", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut() // and are dropped with the connection
	proxy.Resume()
	tf.waitChange(t, "the lost task failed", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeTaskState && c.TaskID == task.ID() && c.To == string(fleet.TaskFailed)
	})
	if _, err := task.Wait(t.Context()); !errors.Is(err, fleet.ErrPromptLost) {
		t.Fatalf("Wait: %v, want ErrPromptLost", err)
	}
	if got := task.Info().State; got != fleet.TaskFailed {
		t.Errorf("task %s, want failed", got)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateIdle)
	peer.mu.Lock()
	if len(peer.tasks) != 0 {
		t.Errorf("the worker got a prompt: %v", peer.tasks)
	}
	peer.mu.Unlock()
	next, rep := submitAndFinish(t, tf, inst, "again")
	if rep.TaskID != next.ID() {
		t.Errorf("report %+v", rep)
	}
}
