package fleet_test

import (
	"errors"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport/trust"
)

// TestSetTrustAppliesToConnectedAgentsAtOnce: SetTrust changes what the
// agents of that machine connected now may do, without a reconnect: a
// downgrade to allow refuses steering from the next operation (viewing
// still works), deny ends their connections. An invalid policy changes
// nothing.
func TestSetTrustAppliesToConnectedAgentsAtOnce(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	ctx := t.Context()

	if _, err := tf.SetTrust("box", trust.Policy("bogus")); err == nil {
		t.Error("SetTrust with an invalid policy accepted")
	}
	if _, err := inst.Prompt(ctx, "still steerable", fleet.PromptOptions{}); err != nil {
		t.Fatalf("prompt after a refused SetTrust: %v", err)
	}
	if _, err := tf.SetTrust("box", trust.Allow); err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Prompt(ctx, "steer", fleet.PromptOptions{}); !errors.Is(err, trust.ErrPolicyRefused) {
		t.Errorf("prompt under allow: %v, want ErrPolicyRefused", err)
	}
	if _, err := inst.Read(ctx, "main.go", fleet.ReadOptions{}); err != nil {
		t.Errorf("read under allow: %v", err)
	}
	c := peer.conn()
	if _, err := tf.SetTrust("box", trust.Deny); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the connection of a denied machine stayed open")
	}
	if _, err := inst.Read(ctx, "main.go", fleet.ReadOptions{}); err == nil {
		t.Error("read on a denied machine succeeded")
	}
}

// TestTranscriptFollowsTheMachinesPolicy: a worker without a session file
// has no transcript; viewing it needs the view policy, which deny takes
// away even while the agent is away.
func TestTranscriptFollowsTheMachinesPolicy(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	if entries, more, err := inst.Transcript(t.Context(), 10); err != nil || more || len(entries) != 0 {
		t.Errorf("Transcript of a worker without a session file = %d entries, more %v, %v", len(entries), more, err)
	}
	if _, err := tf.SetTrust("box", trust.Deny); err != nil {
		t.Fatal(err)
	}
	if _, _, err := inst.Transcript(t.Context(), 10); !errors.Is(err, trust.ErrPolicyRefused) {
		t.Errorf("Transcript on a denied machine: %v, want ErrPolicyRefused", err)
	}
}
