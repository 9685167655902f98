package fleet_test

import (
	"errors"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// TestDeliverAndIsolationRefusals: isolation on an agent without the
// worktree capability is ErrNotSupported before any spawn; a delivery
// with an unknown mode, or of a task whose worker has no worktree, is
// refused without a frame and changes nothing.
func TestDeliverAndIsolationRefusals(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	ctx := t.Context()
	drainFrames(peer)
	if _, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "default", Isolation: &fleet.Isolation{}}); !errors.Is(err, fleet.ErrNotSupported) {
		t.Errorf("isolated spawn on an agent without worktrees: %v, want ErrNotSupported", err)
	}
	for _, fr := range drainFrames(peer) {
		if _, ok := fr.(*transport.SpawnFrame); ok {
			t.Error("spawn sent for an isolation the agent cannot do")
		}
	}
	inst := spawn(t, tf, "box")
	if _, ok := inst.Worktree(); ok {
		t.Error("a worker in a shared cwd reports a worktree")
	}
	task, _ := submitAndFinish(t, tf, inst, "change")
	drainFrames(peer)
	if _, err := task.Deliver(ctx, fleet.DeliverOptions{Mode: transport.DeliveryMode("squash")}); err == nil {
		t.Error("an unknown delivery mode was accepted")
	}
	var de *fleet.DeliveryError
	if _, err := task.Deliver(ctx, fleet.DeliverOptions{Mode: transport.DeliverBranch}); !errors.As(err, &de) || de.Code != "not_isolated" || !errors.Is(err, fleet.ErrDelivery) {
		t.Errorf("delivery of a shared-cwd task: %v, want a not_isolated *DeliveryError", err)
	}
	for _, fr := range drainFrames(peer) {
		if _, ok := fr.(*transport.DeliverFrame); ok {
			t.Errorf("deliver sent for a refused delivery: %+v", fr)
		}
	}
	if info := task.Info(); info.Delivery != nil {
		t.Errorf("a refused delivery was recorded: %+v", info.Delivery)
	}
}
