package fleet_test

import (
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// TestAbortAndStopEndARunningTask: a tracked task whose run is aborted
// ends aborted, one whose instance is stopped while it runs ends stopped;
// neither opens a review when its task_done follows.
func TestAbortAndStopEndARunningTask(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	for _, c := range []struct {
		name string
		end  func(*fleet.Instance) error
		want fleet.TaskState
	}{
		{"abort", func(i *fleet.Instance) error { return i.Abort(t.Context()) }, fleet.TaskAborted},
		{"stop", func(i *fleet.Instance) error { return i.Stop(t.Context()) }, fleet.TaskStopped},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst := spawn(t, tf, "box")
			peer.holdRuns()
			task, err := inst.Submit(t.Context(), "long job", fleet.PromptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := task.Info().State; got != fleet.TaskRunning {
				t.Fatalf("task %s, want running", got)
			}
			if err := c.end(inst); err != nil {
				t.Fatal(err)
			}
			if got := task.Info().State; got != c.want {
				t.Fatalf("task %s after %s, want %s", got, c.name, c.want)
			}
			// Its task_done arrives late. The run stays in peer.held: Abort
			// returns once the abort is sent, and the peer answers it
			// (agent_end) only if it still finds the run held when the
			// frame reaches it, which on a busy machine can be after this.
			peer.mu.Lock()
			peer.holdPrompts = false
			peer.seq++
			seq := peer.seq
			peer.mu.Unlock()
			peer.send(peer.conn(), &transport.TaskDoneFrame{TaskID: task.ID(), InstanceID: inst.ID(), Seq: seq, Status: transport.TaskAborted})
			tf.report(t)
			if got := task.Info().State; got != c.want {
				t.Errorf("task %s after its task_done, want still %s", got, c.want)
			}
			if c.name == "abort" {
				tf.waitInstance(t, inst.ID(), fleet.StateIdle)
				if err := inst.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
