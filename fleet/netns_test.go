//go:build linux

package fleet_test

import (
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/testnet"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
)

// An agent whose address is not loopback is known only by its whois: the
// SDK without a Whois refuses it (hello.machine is a claim anyone can
// make), and admits it with one. The agent sits in a network namespace of
// the test's own, reached over a veth pair with private addresses, so its
// address is genuinely not loopback; nothing else of the host's network
// is touched.
func TestANonLoopbackAgentNeedsAWhois(t *testing.T) {
	ns := testnet.NewNamespace(t, 231)
	agentIP := ns.IP
	peer := peerIn(t, ns, agentIP)
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	agents := []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}}

	t.Run("without a Whois", func(t *testing.T) {
		tf := startFleet(t, t.TempDir(), reg, agents)
		tf.waitUntil(t, "box refused", func(s fleet.Status) bool {
			return len(s.Agents) == 1 && s.Agents[0].State == transport.StateRejected
		})
		st := tf.Status(t.Context()).Agents[0]
		if !strings.Contains(st.LastError, "no Whois to identify "+agentIP) {
			t.Errorf("last error %q, want it to say that no Whois identifies %s", st.LastError, agentIP)
		}
		if _, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/", Bundle: "default"}); err == nil {
			t.Error("a spawn on the refused agent was sent")
		}
	})
	t.Run("with a Whois", func(t *testing.T) {
		whois, err := identity.ParseStatic(agentIP + "=box/ana@example")
		if err != nil {
			t.Fatal(err)
		}
		tf := startFleet(t, t.TempDir(), reg, agents, fleet.WithWhois(whois))
		tf.waitAgent(t, "box", transport.StateEstablished)
		st := tf.Status(t.Context()).Agents[0]
		if st.Machine != "box" || !strings.HasPrefix(st.Addr, agentIP+":") {
			t.Errorf("agent %+v; want machine box at %s", st, agentIP)
		}
	})
}

// peerIn starts a test agent peer listening on addr inside the
// namespace ns.
func peerIn(t *testing.T, ns testnet.Namespace, addr string) *testAgentPeer {
	t.Helper()
	var p *testAgentPeer
	if err := ns.Do(func() { p = newTestAgentPeerAt(t, addr+":0", "box", true) }); err != nil {
		t.Fatal(err)
	}
	return p
}
