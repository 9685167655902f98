package fleet_test

import (
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
)

// A server stops only the workers of its own given-up spawns: an agent
// may serve several servers, and a worker listed under another server's
// spawn id, or under none (an agent of an older version, or one started
// before spawn ids), is left alone (#16).
func TestOnlyTheServersOwnGivenUpSpawnsAreStopped(t *testing.T) {
	stateDir := t.TempDir()
	st, err := serverstore.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := st.ServerID()
	if err != nil || len(id) != 8 {
		t.Fatalf("server id %q, %v", id, err)
	}
	st.Close()

	peer := newTestAgentPeer(t, "box", true)
	peer.mu.Lock()
	peer.caps = []string{transport.CapabilitySpawnID}
	for _, in := range []transport.InstanceInfo{
		{InstanceID: "i-other", SpawnID: "spawn-0badf00d-000000000001"},
		{InstanceID: "i-none"},
		{InstanceID: "i-own", SpawnID: "spawn-" + id + "-000000000002"}, // last: its stop comes after any other
	} {
		in.Cwd, in.Bundle, in.State = "/w", "default", transport.InstanceRunning
		peer.instances[in.InstanceID] = &peerInstance{info: in}
		peer.order = append(peer.order, in.InstanceID)
	}
	peer.mu.Unlock()
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, stateDir, reg, []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}})
	tf.waitAgent(t, "box", transport.StateEstablished)
	if s := nextFrame[*transport.StopFrame](t, peer); s.InstanceID != "i-own" {
		t.Fatalf("the server stopped %s, a worker it did not spawn", s.InstanceID)
	}
	if n := len(tf.Status(t.Context()).Instances); n != 0 {
		t.Errorf("the server took on %d of the agent's workers", n)
	}
}
