//go:build unix

package fleet_test

import (
	"crypto/ed25519"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/netfault"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
)

// Key rotation with a grace period: the connected agent is not touched
// (same connection, same worker); while the grace lasts, a reconnecting
// agent that trusts only the old key is still admitted, because the
// server proves both keys; once the old key is no longer proven, that
// agent is refused until it is given the new one.
func TestKeyRotationKeepsAgentsAndTheirState(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	keyFile := filepath.Join(t.TempDir(), fleet.KeyFile)
	old, err := auth.LoadOrCreate(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, ps := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) {
		c.ServerKeys = []ed25519.PublicKey{old.Public()}
		c.BehindProxy = true // reached through the proxy below, which cuts connections
	})
	proxy, err := netfault.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{proxy.Addr()}}},
		fleet.WithKeyFile(keyFile))
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain"})
	if err != nil {
		t.Fatal(err)
	}

	rotated, err := auth.Rotate(keyFile, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !auth.SameKey(tf.PublicKey(), rotated.Public()) {
		t.Fatal("the fleet does not report the new key")
	}
	drainChanges(tf.sub)
	if text, err := inst.Prompt(t.Context(), "say: still connected", fleet.PromptOptions{}); err != nil || text != "still connected" {
		t.Fatalf("prompt after the rotation: %q, %v", text, err)
	}
	for _, c := range drainChanges(tf.sub) {
		if c.Kind == fleet.ChangeAgentState {
			t.Errorf("the rotation touched the connection: %+v", c)
		}
	}

	// Reconnect during the grace: the old key is still proven.
	proxy.Cut()
	tf.waitChange(t, "reconnected idle", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.Event == string(fleet.EventReconnectedIdle)
	})
	if text, err := inst.Prompt(t.Context(), "say: same worker", fleet.PromptOptions{}); err != nil || text != "same worker" {
		t.Fatalf("prompt after the reconnect: %q, %v", text, err)
	}
	if err := inst.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}

	// Rotated again with no grace: only the newest key is proven, and the
	// agent that trusts only the first one refuses the server.
	if _, err := auth.Rotate(keyFile, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if r, err := auth.ReadKeyRing(keyFile); err != nil || len(r.Active(time.Now())) != 2 {
		t.Fatalf("after the second rotation: %v, %d active keys (the first key's grace still runs for the second)", err, len(r.Active(time.Now())))
	}
	if _, err := auth.Rotate(keyFile, 0, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	drainChanges(tf.sub)
	proxy.Cut()
	tf.waitChange(t, "refused by the agent", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeAgentState && c.Agent == "worker-01" && c.Event == string(transport.EventHandshakeFailed) &&
			strings.Contains(c.Message, "did not accept the server's key proof")
	})
	for _, c := range drainChanges(tf.sub) {
		if c.Kind == fleet.ChangeAgentState && c.To == string(transport.StateEstablished) {
			t.Errorf("established with a key the agent does not trust: %+v", c)
		}
	}
}
