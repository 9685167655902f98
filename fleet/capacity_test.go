package fleet_test

import (
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// An agent says its capacity in its hello (maxWorkers), and Status shows
// it; an agent without a limit says nothing.
func TestStatusShowsTheAgentsCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	limited, _ := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) { c.MaxWorkers = 3 })
	open, _ := startAgentWith(t, pitest.Scripted, reg, nil)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{
		{Name: "limited", Addresses: []string{limited}}, {Name: "open", Addresses: []string{open}}})
	tf.waitAgent(t, "limited", transport.StateEstablished)
	tf.waitAgent(t, "open", transport.StateEstablished)
	for _, a := range tf.Status(t.Context()).Agents {
		if want := map[string]int{"limited": 3, "open": 0}[a.Name]; a.MaxWorkers != want {
			t.Errorf("agent %s: MaxWorkers %d, want %d", a.Name, a.MaxWorkers, want)
		}
	}
}
