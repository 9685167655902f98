package agent

import (
	"slices"
	"testing"

	"example.com/pifleet/transport"
)

// Every listing names the spawn that started each worker, also once the
// agent restarted and re-adopted it: a server that recorded its spawn but
// never stored the answer (killed, or its connection closed, between the
// two) adopts the worker by it, or stops one it gave up (#16).
func TestInstancesNameTheirSpawnAcrossARestart(t *testing.T) {
	h1 := newHarness(t, hopts{})
	c := h1.dial(t)
	if hello := c.hello(); !slices.Contains(hello.Capabilities, transport.CapabilitySpawnID) {
		t.Fatalf("hello capabilities %v lack %s", hello.Capabilities, transport.CapabilitySpawnID)
	}
	inst := c.mustSpawn("spawn-k-1", h1.cwd, "default", nil)
	if inst.SpawnID != "spawn-k-1" {
		t.Errorf("spawned names spawn %q, want spawn-k-1", inst.SpawnID)
	}
	if l := c.roundTrip("l").Instances; len(l) != 1 || l[0].SpawnID != "spawn-k-1" {
		t.Fatalf("list: %+v", l)
	}
	h1.a.Close() // the worker keeps running under its shim

	h2 := newHarness(t, hopts{stateDir: h1.cfg.StateDir, agentDir: h1.agentDir, cwd: h1.cwd, registry: h1.registry})
	d := h2.dial(t)
	d.hello()
	l := d.roundTrip("l").Instances
	if len(l) != 1 || l[0].InstanceID != inst.InstanceID || l[0].State != transport.InstanceRunning || l[0].SpawnID != "spawn-k-1" {
		t.Fatalf("after the restart: %+v", l)
	}
	st := &transport.StopFrame{InstanceID: inst.InstanceID}
	st.ID = "stop"
	d.send(st)
	d.reply("stop")
}
