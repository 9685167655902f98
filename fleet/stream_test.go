//go:build unix

package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/internal/pitest"
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
	// turn_end and agent_end repeat the message: they come as references
	// to it.
	msg := strings.TrimSuffix(strings.TrimPrefix(string(lines[len(lines)-1]), `{"type":"message_end","message":`), "}")
	lines = append(lines, []byte(`{"type":"turn_end","message":`+msg+`,"toolResults":[]}`), []byte(`{"type":"agent_end","messages":[`+msg+`]}`))
	c := peer.conn()
	refs := 0
	for _, f := range streamFrames(inst.ID(), lines, 1000, "delta") {
		d, ok := f.(*transport.EventDeltaFrame)
		if !ok {
			t.Fatalf("the agent's coding sent a %s", f.FrameType())
		}
		refs += strings.Count(string(d.Updates), `{"m":`)
		if err := c.Send(t.Context(), f); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	tf.waitChange(t, "the message_end", func(ch fleet.Change) bool {
		if ch.Kind == fleet.ChangeEvent && ch.InstanceID == inst.ID() {
			got = append(got, string(ch.WorkerEvent.Raw()))
		}
		return ch.Kind == fleet.ChangeEvent && ch.Event == "agent_end"
	})
	if refs != 2 {
		t.Fatalf("%d events referred to the message; want turn_end and agent_end", refs)
	}
	if len(got) != len(lines) {
		t.Fatalf("%d events out of %d", len(got), len(lines))
	}
	for i := range lines {
		if got[i] != string(lines[i]) {
			t.Fatalf("event %d rebuilt as\n%s\nwant\n%s", i, got[i], lines[i])
		}
	}
	// The tail behind Output holds the updates unwritten until read, now
	// that the rebuilder has moved past them: they read as pi wrote them.
	// (The peer answers no get_state now: a context already done skips
	// Output's snapshot.)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	out, err := inst.Output(done)
	if err != nil {
		t.Fatal(err)
	}
	var tail []string
	for _, raw := range out.Tail {
		if len(tail) > 0 || string(raw) == string(lines[0]) {
			tail = append(tail, string(raw))
		}
	}
	if len(tail) < len(lines) {
		t.Fatalf("the tail holds %d of the answer's %d events", len(tail), len(lines))
	}
	for i := range lines {
		if tail[i] != string(lines[i]) {
			t.Fatalf("tail event %d reads\n%s\nwant\n%s", i, tail[i], lines[i])
		}
	}

	// A coded update with no base on this connection.
	base := 5000.0
	bad := &transport.EventDeltaFrame{InstanceID: inst.ID(), Seq: 5001, Base: &base,
		Updates: json.RawMessage(`[["more text"]]`)}
	sendRefused(t, tf, c, bad, "more text", "whose streamed output it cannot rebuild")
	tf.waitAgent(t, "box", transport.StateEstablished)

	// On the new connection, a reference to the message the old one
	// carried is refused too: nothing is delivered, the connection goes.
	c = peer.conn()
	ref := &transport.EventDeltaFrame{InstanceID: inst.ID(), Seq: 6000,
		Updates: json.RawMessage(`[{"m":{"type":"turn_end","message":null,"toolResults":["leaked"]},"r":[[[1],` + fmt.Sprint(1000+len(lines)-3) + `]]}]`)}
	sendRefused(t, tf, c, ref, "leaked", "that referred to a message it does not hold")
}

// sendRefused sends fr, an event_delta the server cannot rebuild, on the
// agent's connection c, and checks that the server closes c (a
// connection why) and delivers no event containing marker.
func sendRefused(t *testing.T, tf *testFleet, c *transport.Conn, fr *transport.EventDeltaFrame, marker, why string) {
	t.Helper()
	if err := c.Send(t.Context(), fr); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the server kept a connection %s", why)
	}
	for _, ch := range drainChanges(tf.sub) {
		if ch.Kind == fleet.ChangeEvent && strings.Contains(string(ch.WorkerEvent.Raw()), marker) {
			t.Fatalf("an event the server could not rebuild was delivered: %s", ch.WorkerEvent.Raw())
		}
	}
}

// A streamed answer through a real agent and worker: by default the
// updates of a text that the agent gathers into one frame reach the
// server as one, whose delta is theirs joined, so a listener appending
// deltas has the whole text and every update's partial message is the
// text so far; with WithEveryUpdate the server gets each of the worker's
// updates. Neither loses the connection on the way (a frame the server
// could not rebuild would close it, and the events would come again
// whole).
func TestJoinedUpdatesCarryTheWholeText(t *testing.T) {
	const size = 3000
	text := answerText(size)
	for _, every := range []bool{false, true} {
		t.Run(fmt.Sprintf("every=%v", every), func(t *testing.T) {
			reg := t.TempDir()
			publish(t, reg, "plain", `{}`)
			addr, ps := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) {
				c.Env = append(c.Env, "PIFLEET_FAUX_CHUNK=1")
			})
			var opts []fleet.Option
			if every {
				opts = append(opts, fleet.WithEveryUpdate())
			}
			tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}}, opts...)
			tf.waitAgent(t, "worker-01", transport.StateEstablished)
			inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain"})
			if err != nil {
				t.Fatal(err)
			}
			drainChanges(tf.sub)
			var (
				deltas  strings.Builder
				updates int
			)
			got, err := inst.Prompt(t.Context(), "say: "+text, fleet.PromptOptions{OnEvent: func(ev fleet.Event) {
				if ev.Type != "message_update" {
					return
				}
				var u struct {
					Step struct {
						Type, Delta string
						Partial     struct {
							Content []struct{ Text string }
						}
					} `json:"assistantMessageEvent"`
				}
				if err := json.Unmarshal(ev.Raw(), &u); err != nil {
					t.Errorf("update: %v", err)
					return
				}
				if u.Step.Type != "text_delta" {
					return
				}
				updates++
				deltas.WriteString(u.Step.Delta)
				if c := u.Step.Partial.Content; len(c) != 1 || c[0].Text != deltas.String() {
					t.Errorf("after %d characters of deltas the partial message holds %+v", deltas.Len(), c)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got != text || deltas.String() != text {
				t.Fatalf("answer of %d characters, deltas of %d; want %d", len(got), deltas.Len(), size)
			}
			switch {
			case every && updates != size:
				t.Errorf("%d text updates with WithEveryUpdate; the worker streamed %d", updates, size)
			case !every && updates >= size:
				t.Errorf("%d text updates: none joined", updates)
			}
			t.Logf("%d text updates for %d chunks", updates, size)
			for _, ch := range drainChanges(tf.sub) {
				if ch.Kind == fleet.ChangeAgentState {
					t.Errorf("the connection changed state during the answer: %s → %s", ch.From, ch.To)
				}
			}
			if err := inst.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A worker's exit notice ends its stream on the connection: the server
// lets go of the partial message it was rebuilding (and the finished
// ones it held), so an update coded against them after the notice,
// which no agent sends, has no base and closes the connection.
func TestAWorkersExitEndsItsStream(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	drainChanges(tf.sub)
	lines := scriptedLines(answerText(100), 16)
	lines = lines[:len(lines)-2] // mid-answer: no text_end, no message_end
	var enc streamdelta.Encoder
	var ch streamdelta.Chain
	b := streamdelta.NewBatch(inst.ID())
	for i, l := range lines {
		c := enc.Encode(uint64(1000+i), l)
		b.Add(&ch, &c)
	}
	c := peer.conn()
	if err := c.Send(t.Context(), b.Frame()); err != nil {
		t.Fatal(err)
	}
	last := float64(1000 + len(lines) - 1)
	tf.waitChange(t, "the last update", func(ch fleet.Change) bool {
		return ch.Kind == fleet.ChangeEvent && ch.InstanceID == inst.ID() && ch.WorkerEvent != nil &&
			ch.WorkerEvent.Raw() != nil && string(ch.WorkerEvent.Raw()) == string(lines[len(lines)-1])
	})
	peer.send(c, &transport.WorkerExitedFrame{InstanceID: inst.ID(), Signal: "KILL", State: transport.InstanceExited})
	tf.waitInstance(t, inst.ID(), fleet.StateStopped)
	late := &transport.EventDeltaFrame{InstanceID: inst.ID(), Seq: last + 1, Base: &last, Updates: json.RawMessage(`[["after the exit"]]`)}
	sendRefused(t, tf, c, late, "after the exit", "that carried a stream past its worker's exit")
}
