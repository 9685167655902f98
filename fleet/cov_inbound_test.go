package fleet_test

import (
	"context"
	"sync/atomic"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// TestInboundGateRefusesUnknownAndDeniedPeersBeforeTrustIsAsked: an agent
// dialling in from an address whois cannot name, or from a machine
// denied already, is cut off before the key handshake: nobody is asked
// and no agent joins.
func TestInboundGateRefusesUnknownAndDeniedPeersBeforeTrustIsAsked(t *testing.T) {
	var asked atomic.Int32
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	inboundFleet := func(static string) *testFleet {
		whois, err := identity.ParseStatic(static)
		if err != nil {
			t.Fatal(err)
		}
		return startFleet(t, t.TempDir(), reg, nil,
			fleet.WithInbound("127.0.0.1:0"), fleet.WithWhois(whois),
			fleet.WithPrompter(trust.PrompterFunc(func(context.Context, identity.Identity) (trust.Policy, error) {
				asked.Add(1)
				return trust.Steer, nil
			})))
	}
	tf := inboundFleet("127.0.0.9=elsewhere/eve@example")
	stranger := newTestAgentPeer(t, "laptop", true)
	stranger.dialIn(tf.InboundAddr())
	select {
	case <-stranger.conn().Done():
	case <-t.Context().Done():
		t.Fatal("a peer whois cannot name stayed connected")
	}

	tf2 := inboundFleet("127.0.0.1=laptop/ana@github")
	if _, err := tf2.Trust().Set("laptop", trust.Deny); err != nil {
		t.Fatal(err)
	}
	denied := newTestAgentPeer(t, "laptop", true)
	denied.dialIn(tf2.InboundAddr())
	select {
	case <-denied.conn().Done():
	case <-t.Context().Done():
		t.Fatal("a denied machine stayed connected")
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("trust asked %d times about refused peers", n)
	}
	for _, f := range []*testFleet{tf, tf2} {
		if st := f.Status(t.Context()); len(st.Agents) != 0 {
			t.Errorf("refused peers joined: %+v", st.Agents)
		}
	}
}

// TestSessionsIsPerAgent: Sessions returns what that agent reported, and
// nothing for an agent that reported nothing or is not in the directory.
func TestSessionsIsPerAgent(t *testing.T) {
	a, b := newTestAgentPeer(t, "box-a", true), newTestAgentPeer(t, "box-b", true)
	tf := newTestFleet(t, a, b)
	report(t, tf, a, transport.SessionInfo{SessionID: "s-1", Path: "/s/one.jsonl", Cwd: "/w", Kind: "scratch", UpdatedAt: 100})
	if got := tf.Sessions("box-a"); len(got) != 1 || got[0].SessionID != "s-1" || got[0].Machine != "box-a" {
		t.Errorf("Sessions(box-a) = %+v", got)
	}
	if got := tf.Sessions("box-b"); len(got) != 0 {
		t.Errorf("Sessions of an agent that reported nothing = %+v", got)
	}
	if got := tf.Sessions("nowhere"); got != nil {
		t.Errorf("Sessions of an unknown agent = %+v", got)
	}
}
