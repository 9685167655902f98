package fleet_test

import (
	"errors"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// TestAcceptDefaultsToStopAndRefusesAnUnknownDisposition: a disposition
// that is neither stop nor keep_idle changes nothing and sends nothing;
// an empty one stops the worker. Wait on a task stopped before its end
// is ErrInstanceEnded; a submit while a task is open is a *StateError.
func TestAcceptDefaultsToStopAndRefusesAnUnknownDisposition(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	task, _ := submitAndFinish(t, tf, inst, "change")
	if _, err := inst.Submit(t.Context(), "another", fleet.PromptOptions{}); !errors.Is(err, fleet.ErrInvalidState) {
		t.Errorf("submit while a task awaits review: %v, want ErrInvalidState", err)
	}
	if info, err := task.Wait(t.Context()); err != nil || info.TaskID != task.ID() || info.LastDone == nil {
		t.Errorf("Wait on a finished task = %+v, %v", info, err)
	}

	drainFrames(peer)
	err := task.Accept(t.Context(), transport.Disposition("archive"))
	var bad *fleet.DispositionError
	if !errors.Is(err, fleet.ErrBadDisposition) || !errors.As(err, &bad) || bad.Disposition != "archive" {
		t.Fatalf("accept with an unknown disposition: %v, want a *DispositionError naming it", err)
	}
	if got := inst.State(); got != fleet.StateAwaitingReview {
		t.Errorf("state after a refused accept: %s", got)
	}
	for _, fr := range drainFrames(peer) {
		if _, ok := fr.(*transport.TaskAcceptFrame); ok {
			t.Errorf("task_accept sent for a refused disposition: %+v", fr)
		}
	}
	if err := task.Accept(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	if fr := nextFrame[*transport.TaskAcceptFrame](t, peer); fr.Disposition != transport.DispositionStop {
		t.Errorf("task_accept disposition %q, want stop", fr.Disposition)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateStopped)
	select {
	case <-task.Done():
	default:
		t.Error("Done of a finished task is not closed")
	}

	inst2 := spawn(t, tf, "box")
	peer.mu.Lock()
	peer.holdPrompts = true
	peer.mu.Unlock()
	open, err := inst2.Submit(t.Context(), "long", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tf.waitInstance(t, inst2.ID(), fleet.StateRunning)
	if err := inst2.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := open.Wait(t.Context()); !errors.Is(err, fleet.ErrInstanceEnded) {
		t.Errorf("Wait on a task whose instance was stopped: %v, want ErrInstanceEnded", err)
	}
}
