package fleet_test

import (
	"context"
	"errors"
	"testing"

	"example.com/pifleet/fleet"
)

// TestRunResultBeforeAndAfterItSettles: a Run's Result says it is not
// settled while the worker streams, Wait gives up with its context and
// leaves the run going, and once it settles Result and Wait agree; a
// stopped instance's Ended is closed.
func TestRunResultBeforeAndAfterItSettles(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	peer.mu.Lock()
	peer.holdPrompts = true
	peer.mu.Unlock()

	r, err := inst.PromptAsync(t.Context(), "slow", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if text, err := r.Result(); err == nil || text != "" {
		t.Errorf("Result of a running prompt = %q, %v; want an error", text, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a cancelled context = %v", err)
	}
	select {
	case <-r.Done():
		t.Fatal("the run ended when a waiter gave up")
	default:
	}
	tf.waitInstance(t, inst.ID(), fleet.StateRunning)
	peer.releaseHeld()
	text, err := r.Wait(t.Context())
	if err != nil || text != "done: slow ("+inst.ID()+")" {
		t.Fatalf("Wait = %q, %v", text, err)
	}
	if t2, err2 := r.Result(); t2 != text || err2 != nil {
		t.Errorf("Result after Wait = %q, %v", t2, err2)
	}
	// An ended run answers with its result, whatever the context says.
	for range 64 {
		if t2, err2 := r.Wait(ctx); t2 != text || err2 != nil {
			t.Fatalf("Wait of an ended run with a done context = %q, %v", t2, err2)
		}
	}

	select {
	case <-inst.Ended():
		t.Fatal("Ended closed on a live instance")
	default:
	}
	if err := inst.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.Ended():
	case <-t.Context().Done():
		t.Fatal("Ended not closed after Stop")
	}
}

// TestASlowSubscriberLosesChangesNotTheFleet: a subscriber that does not
// read loses changes, counted by Dropped, while the fleet goes on; a
// subscription made after Close is closed at once.
func TestASlowSubscriberLosesChangesNotTheFleet(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	slow := tf.Subscribe(1)
	defer slow.Close()
	inst := spawn(t, tf, "box")
	if _, err := inst.Prompt(t.Context(), "hi", fleet.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	if slow.Dropped() == 0 {
		t.Error("a spawn and a prompt fitted in a buffer of one change")
	}
	if _, ok := <-slow.C; !ok {
		t.Error("the slow subscriber's one buffered change is lost")
	}
	slow.Close()
	slow.Close() // idempotent
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-tf.Subscribe(8).C; ok {
		t.Error("a subscription to a closed fleet received a change")
	}
}

// A task whose report came answers Wait with it, whatever the context says.
func TestWaitOfAFinishedTaskIgnoresItsContext(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	task, _ := submitAndFinish(t, tf, inst, "write the docs")
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for range 64 {
		if info, err := task.Wait(done); err != nil || info.TaskID != task.ID() {
			t.Fatalf("Wait of a finished task with a done context = %+v, %v", info, err)
		}
	}
}
