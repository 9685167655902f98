//go:build unix

package fleet_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// The server rebuilds event_delta frames into pi's events for every
// consumer; a frame it cannot rebuild closes the connection (the agent
// reconnects and the events come again whole), and nothing corrupt is
// delivered.
func TestServerRebuildsStreamedOutput(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	drainChanges(tf.sub)
	lines := scriptedLines(answerText(300), 16)
	c := peer.conn()
	for _, f := range streamFrames(inst.ID(), lines, 1000, false) {
		if _, ok := f.(*transport.EventDeltaFrame); !ok {
			t.Fatalf("the agent's coding sent a %s", f.FrameType())
		}
		if err := c.Send(t.Context(), f); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	tf.waitChange(t, "the message_end", func(ch fleet.Change) bool {
		if ch.Kind == fleet.ChangeEvent && ch.InstanceID == inst.ID() {
			got = append(got, string(ch.WorkerEvent.Raw))
		}
		return ch.Kind == fleet.ChangeEvent && ch.Event == "message_end"
	})
	if len(got) != len(lines) {
		t.Fatalf("%d events out of %d", len(got), len(lines))
	}
	for i := range lines {
		if got[i] != string(lines[i]) {
			t.Fatalf("event %d rebuilt as\n%s\nwant\n%s", i, got[i], lines[i])
		}
	}

	// A coded update with no base on this connection.
	base := 5000.0
	bad := &transport.EventDeltaFrame{InstanceID: inst.ID(), Seq: 5001, Base: &base,
		Updates: json.RawMessage(`[["more text"]]`)}
	if err := c.Send(t.Context(), bad); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server kept a connection whose streamed output it cannot rebuild")
	}
	for _, ch := range drainChanges(tf.sub) {
		if ch.Kind == fleet.ChangeEvent && strings.Contains(string(ch.WorkerEvent.Raw), "more text") {
			t.Fatalf("a corrupt event was delivered: %s", ch.WorkerEvent.Raw)
		}
	}
	tf.waitAgent(t, "box", transport.StateEstablished)
}
