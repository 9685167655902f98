package fleet_test

import (
	"errors"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// TestRebundleTakesTheNewBundlesReviewAndKeepsTheOldOnFailure: a bundle
// the registry does not have is refused before any frame; a worker that
// synced but could not restart keeps its bundle (restart_failed); a
// switched worker's next task follows the new bundle's review.maxRejects.
func TestRebundleTakesTheNewBundlesReviewAndKeepsTheOldOnFailure(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	peer.mu.Lock()
	peer.script = func(c *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
		if rb, ok := fr.(*transport.RebundleFrame); ok && rb.Bundle == "unstartable" {
			reply(&transport.RebundledFrame{InstanceID: rb.InstanceID, Bundle: "default",
				Error: &transport.FsError{Code: "restart_failed", Message: "pi exited at once"}})
			return true
		}
		return false
	}
	peer.mu.Unlock()
	tf := newTestFleet(t, peer)
	publish(t, tf.regRoot, "unstartable", `{}`)
	publish(t, tf.regRoot, "strict", `{"review":{"maxRejects":0}}`)
	inst := spawn(t, tf, "box")
	ctx := t.Context()

	drainFrames(peer)
	if err := inst.Rebundle(ctx, "no-such-bundle"); err == nil {
		t.Error("rebundle to a bundle the registry does not have succeeded")
	}
	for _, fr := range drainFrames(peer) {
		if _, ok := fr.(*transport.RebundleFrame); ok {
			t.Errorf("rebundle frame sent for an unknown bundle: %+v", fr)
		}
	}
	var re *fleet.RebundleError
	if err := inst.Rebundle(ctx, "unstartable"); !errors.As(err, &re) || re.Code != "restart_failed" || re.Bundle != "default" || re.Target != "unstartable" {
		t.Fatalf("rebundle that could not restart = %v, want a restart_failed *RebundleError keeping default", err)
	}
	if b := tf.Status(ctx).Instances[0].Bundle; b != "default" {
		t.Errorf("bundle after a failed rebundle %q", b)
	}

	if err := inst.Rebundle(ctx, "strict"); err != nil {
		t.Fatal(err)
	}
	task, _ := submitAndFinish(t, tf, inst, "change")
	esc, err := task.Reject(ctx, "no")
	if err != nil || !esc {
		t.Errorf("Reject under the new bundle's maxRejects 0 = %v, %v; want escalated", esc, err)
	}
}

// TestSetToolsAndRebundleNeedAPifleetAgent: a v1 agent has neither; the
// fleet says so instead of sending a frame the agent would not know.
func TestSetToolsAndRebundleNeedAPifleetAgent(t *testing.T) {
	peer := newTestAgentPeer(t, "box", false)
	tf := newTestFleet(t, peer)
	publish(t, tf.regRoot, "next", `{}`)
	inst := spawn(t, tf, "box")
	drainFrames(peer)
	if _, err := inst.SetTools(t.Context(), []string{"read"}); !errors.Is(err, fleet.ErrNotSupported) {
		t.Errorf("SetTools on a v1 agent: %v, want ErrNotSupported", err)
	}
	if err := inst.Rebundle(t.Context(), "next"); !errors.Is(err, fleet.ErrNotSupported) {
		t.Errorf("Rebundle on a v1 agent: %v, want ErrNotSupported", err)
	}
	for _, fr := range drainFrames(peer) {
		switch fr.(type) {
		case *transport.SetToolsFrame, *transport.RebundleFrame:
			t.Errorf("%s sent to a v1 agent", fr.FrameType())
		}
	}
}
