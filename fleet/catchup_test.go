package fleet_test

import (
	"context"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// reconnect drops the peer's connection and waits for the fleet to dial
// it again and take its full sessions report.
func reconnect(t *testing.T, tf *testFleet, p *testAgentPeer, sessions ...transport.SessionInfo) {
	t.Helper()
	old := p.conn()
	_ = old.Close()
	tf.waitUntil(t, "a new connection", func(fleet.Status) bool {
		c := p.conn()
		return c != nil && c != old
	})
	tf.waitAgent(t, p.machine, transport.StateEstablished)
	report(t, tf, p, sessions...)
}

// After an agent restart, an ended instance whose session was not yet
// mirrored to its end is caught up once more; the agent no longer knows
// it (unknown_instance), so nothing more can come: the mirror is done
// with what it has, and later reconnects ask for it no more (the fleet
// used to ask again after every full report and every settle, forever).
func TestCatchUpOfAnInstanceTheAgentForgotEnds(t *testing.T) {
	peer := newTestAgentPeer(t, "w1", true)
	peer.sessionDir = "/sessions"
	tf := newTestFleet(t, peer)
	ctx := t.Context()
	inst, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: "w1", Cwd: "/repo", Bundle: "default"})
	if err != nil {
		t.Fatal(err)
	}
	path := inst.SessionPath()
	if path == "" {
		t.Fatal("no session path")
	}
	sess := transport.SessionInfo{Path: path, SessionID: "s-1", Cwd: "/repo", Kind: "scratch", UpdatedAt: 100}
	caught := tf.Subscribe(256)
	defer caught.Close()
	report(t, tf, peer, sess)
	waitCatchUp(t, caught, inst.ID()) // the live worker's, after the report
	// The agent restarts: it forgets the worker; the stop finds it gone.
	peer.forget(inst.ID())
	if err := inst.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	entriesAsked := func() int {
		n := 0
		for _, fr := range drainFrames(peer) {
			if e, ok := fr.(*transport.SessionEntriesFrame); ok && e.InstanceID == inst.ID() {
				n++
			}
		}
		return n
	}
	// The catch-up after the end, or after the reconnect, is answered
	// unknown_instance.
	reconnect(t, tf, peer, sess)
	waitCatchUp(t, caught, inst.ID())
	entriesAsked()
	// Later reconnects: the mirror is done, nothing is asked. A live
	// worker's catch-up, which the same report schedules, orders the check.
	live, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: "w1", Cwd: "/repo", Bundle: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		reconnect(t, tf, peer, sess, transport.SessionInfo{Path: live.SessionPath(), SessionID: "s-2", Cwd: "/repo", Kind: "scratch", UpdatedAt: 200})
		waitCatchUp(t, caught, live.ID())
		if n := entriesAsked(); n != 0 {
			t.Fatalf("session_entries asked %d times for the forgotten instance after its mirror ended", n)
		}
	}
	_ = live.Stop(context.Background())
}

func waitCatchUp(t *testing.T, sub *fleet.Subscription, id string) {
	t.Helper()
	for {
		select {
		case c := <-sub.C:
			if c.Kind == fleet.ChangeSessionEntries && c.InstanceID == id {
				return
			}
		case <-t.Context().Done():
			t.Fatalf("no catch-up of %s", id)
		}
	}
}
