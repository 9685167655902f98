//go:build unix

package agent

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/transport"
)

// deltaCaps is the hello of a pifleet server that reads event_delta and
// resolves references.
var deltaCaps = []string{transport.CapabilityPifleet, transport.CapabilityEventDelta, transport.CapabilityEventRefs}

// streamed is what one server connection made of a worker's events: each
// event by seq, rebuilt when it came coded.
type streamed struct {
	t      *testing.T
	c      *client
	rb     *streamdelta.Rebuilder
	events map[uint64]string
	order  []uint64
	deltas int            // event_delta frames
	refs   int            // events that referred to messages the connection held
	joined int            // joined runs of updates
	whole  map[string]int // events that came whole (event frames), by type
}

func newStreamed(t *testing.T, c *client) *streamed {
	return &streamed{t: t, c: c, rb: streamdelta.NewRebuilder(transport.MaxFrameBytes), events: map[uint64]string{}, whole: map[string]int{}}
}

// until reads the events of instance id until one whose line contains
// last (or the frame limit), rebuilding event_delta frames as the server
// does.
func (s *streamed) until(id, last string) {
	s.t.Helper()
	add := func(ev *transport.EventFrame) {
		seq := uint64(*ev.Seq)
		if _, dup := s.events[seq]; !dup {
			s.order = append(s.order, seq)
		}
		s.events[seq] = string(ev.Event)
	}
	for {
		f := s.c.next(func(f transport.Frame) bool {
			switch f := f.(type) {
			case *transport.EventFrame:
				return f.InstanceID == id
			case *transport.EventDeltaFrame:
				return f.InstanceID == id
			}
			return false
		}, "an event of "+id)
		switch f := f.(type) {
		case *transport.EventFrame:
			add(f)
			var head struct{ Type string }
			_ = json.Unmarshal(f.Event, &head)
			s.whole[head.Type]++
			if strings.Contains(string(f.Event), last) {
				return
			}
		case *transport.EventDeltaFrame:
			s.deltas++
			s.refs += strings.Count(string(f.Updates), `{"m":`)
			s.joined += strings.Count(string(f.Updates), `{"c":`)
			done := false
			if err := s.rb.RebuildFrame(f, func(ev *transport.EventFrame, _ []byte) {
				add(ev)
				done = done || strings.Contains(string(ev.Event), last)
			}); err != nil {
				s.t.Fatalf("rebuild: %v", err)
			}
			if done {
				return
			}
		}
	}
}

// streamPrompt is an answer with thinking, text that JSON escapes, a tool
// call, and a second message after the tool's result.
func streamPrompt(n int) string {
	words := `plain words, "quotes", back\slash, tab	, <html>&amp;, é, 🚀; `
	text := strings.Repeat(words, n/len(words)+1)[:n]
	return "think: weighing \"this\" and that\nsay: " + text + "\nbash: echo tool-ran"
}

// A server that reads event_delta rebuilds exactly the events a server
// that does not gets whole, from the same worker at the same time.
func TestStreamedOutputRebuildsToTheWholeEvents(t *testing.T) {
	w, d := streamToBoth(t, newHarness(t, hopts{}), deltaCaps, "default", nil, streamPrompt(3000))
	if w.deltas != 0 || d.deltas == 0 {
		t.Fatalf("event_delta frames: %d to the whole server, %d to the delta one", w.deltas, d.deltas)
	}
	// Two turns (the tool call's and the answer after it), then agent_end.
	if d.refs < 3 {
		t.Fatalf("%d events referred to messages sent before; want every turn_end and the agent_end", d.refs)
	}
}

// A server that reads event_delta but does not resolve references (a
// pifleet server of before references) gets turn_end and agent_end
// whole, and the rest rebuilt as before.
func TestServerWithoutReferencesGetsRepeatedMessagesWhole(t *testing.T) {
	noRefs := []string{transport.CapabilityPifleet, transport.CapabilityEventDelta}
	_, d := streamToBoth(t, newHarness(t, hopts{}), noRefs, "default", nil, streamPrompt(1000))
	if d.deltas == 0 || d.refs != 0 || d.whole["turn_end"] < 2 || d.whole["agent_end"] != 1 {
		t.Fatalf("%d event_delta frames, %d references, whole events %v", d.deltas, d.refs, d.whole)
	}
}

// streamToBoth spawns a worker of bundle on h (mod, when set, adjusts its
// spawn) and has it answer prompt text, while two servers are connected:
// one reading events whole, one reading event_delta with caps. It returns
// what each made of the answer, once each has its agent_end, and checks
// that the two match (checkStreamsMatch).
func streamToBoth(t *testing.T, h *harness, caps []string, bundle string, mod func(*transport.SpawnFrame), text string) (w, d *streamed) {
	t.Helper()
	whole := h.dialPifleet(t)
	delta := dialAs(t, h.a.Addr().String(), "", &greeting{key: testServerKey, caps: caps})
	whole.hello()
	delta.hello()
	id := whole.mustSpawn("s", h.cwd, bundle, mod).InstanceID
	whole.rpc(id, "", prompt("p", text))
	w, d = newStreamed(t, whole), newStreamed(t, delta)
	w.until(id, `"type":"agent_end"`)
	d.until(id, `"type":"agent_end"`)
	checkStreamsMatch(t, w, d)
	return w, d
}

func checkStreamsMatch(t *testing.T, w, d *streamed) {
	t.Helper()
	if d := cmp.Diff(w.order, d.order); d != "" {
		t.Fatalf("seqs differ (-whole +rebuilt):\n%s", d)
	}
	if updates := checkRebuilt(t, w, d); updates < 10 {
		t.Fatalf("only %d message_update events streamed", updates)
	}
}

// checkRebuilt requires every event d got to be the one w got whole, and
// counts the message_update events among them.
func checkRebuilt(t *testing.T, w, d *streamed) (updates int) {
	t.Helper()
	for _, seq := range d.order {
		if diff := cmp.Diff(w.events[seq], d.events[seq]); diff != "" {
			t.Fatalf("event %d differs (-whole +rebuilt):\n%s", seq, diff)
		}
		if strings.HasPrefix(d.events[seq], `{"type":"message_update"`) {
			updates++
		}
	}
	return updates
}

// A server that announces event-coalesce gets the chunks of a text that
// wait in one frame joined: fewer updates, the same seqs for everything
// else, the same text in its deltas, and every event but a joined update
// as a server that reads events whole gets it. One that does not
// announce it gets no joined run.
func TestACoalescingServerGetsTextChunksJoined(t *testing.T) {
	coalescing := append(slices.Clip(deltaCaps), transport.CapabilityEventCoalesce)
	for _, caps := range [][]string{coalescing, deltaCaps} {
		h := newHarness(t, hopts{})
		whole := h.dialPifleet(t)
		delta := dialAs(t, h.a.Addr().String(), "", &greeting{key: testServerKey, caps: caps})
		whole.hello()
		delta.hello()
		id := whole.mustSpawn("s", h.cwd, "default", nil).InstanceID
		whole.rpc(id, "", prompt("p", streamPrompt(3000)))
		w, d := newStreamed(t, whole), newStreamed(t, delta)
		w.until(id, `"type":"agent_end"`)
		d.until(id, `"type":"agent_end"`)
		if !slices.Contains(caps, transport.CapabilityEventCoalesce) {
			if d.joined != 0 {
				t.Fatalf("%d joined runs to a server that did not ask for them", d.joined)
			}
			checkStreamsMatch(t, w, d)
			continue
		}
		if d.joined == 0 || len(d.order) >= len(w.order) {
			t.Fatalf("%d joined runs, %d events of the worker's %d", d.joined, len(d.order), len(w.order))
		}
		var wantText, gotText strings.Builder
		next := 0 // in w.order
		for _, seq := range d.order {
			for ; next < len(w.order) && w.order[next] < seq; next++ {
				if skipped := w.events[w.order[next]]; !strings.HasPrefix(skipped, `{"type":"message_update"`) {
					t.Fatalf("an event that is not an update was joined: %s", skipped)
				}
				wantText.WriteString(textDelta(t, w.events[w.order[next]]))
			}
			if next == len(w.order) || w.order[next] != seq {
				t.Fatalf("the coalescing server got seq %d, which the worker's stream does not have there", seq)
			}
			wantText.WriteString(textDelta(t, w.events[seq]))
			gotText.WriteString(textDelta(t, d.events[seq]))
			if !strings.HasPrefix(d.events[seq], `{"type":"message_update"`) && d.events[seq] != w.events[seq] {
				t.Fatalf("event %d differs:\n got %s\nwant %s", seq, d.events[seq], w.events[seq])
			}
			next++
		}
		if gotText.String() != wantText.String() || gotText.Len() < 3000 {
			t.Fatalf("the joined deltas hold %d characters of text, the worker's %d", gotText.Len(), wantText.Len())
		}
	}
}

// textDelta is the delta of a text_delta update (empty for any other
// event).
func textDelta(t *testing.T, line string) string {
	t.Helper()
	var u struct {
		Step struct{ Type, Delta string } `json:"assistantMessageEvent"`
	}
	if err := json.Unmarshal([]byte(line), &u); err != nil {
		t.Fatal(err)
	}
	if u.Step.Type != "text_delta" {
		return ""
	}
	return u.Step.Delta
}

// A server that connects mid-answer (a reconnect) gets its first update
// whole and every later one rebuilt correctly.
func TestStreamJoinedMidAnswerRebuildsCorrectly(t *testing.T) {
	h := newHarness(t, hopts{})
	whole := h.dialPifleet(t)
	first := dialAs(t, h.a.Addr().String(), "", &greeting{key: testServerKey, caps: deltaCaps})
	whole.hello()
	first.hello()
	inst := whole.mustSpawn("s", h.cwd, "default", nil)
	id := inst.InstanceID
	// 1,000 updates, 5 ms apart: the answer is still streaming when the
	// second delta server has connected.
	whole.rpc(id, "", prompt("p", "delay: 5\nsay: "+strings.Repeat("0123456789abcdef", 1000)))
	nextOf(first, func(f *transport.EventDeltaFrame) bool { return f.InstanceID == id })
	first.close()
	second := dialAs(t, h.a.Addr().String(), "", &greeting{key: testServerKey, caps: deltaCaps})
	second.hello()
	w, d := newStreamed(t, whole), newStreamed(t, second)
	w.until(id, `"type":"agent_end"`)
	d.until(id, `"type":"agent_end"`)
	if d.deltas == 0 || len(d.order) == 0 {
		t.Fatal("the second server got no streamed updates")
	}
	if joined := checkRebuilt(t, w, d); joined < 10 {
		t.Fatalf("the second server joined after the answer: %d updates", joined)
	}
}

// The real pi's streamed answer rebuilds identically too.
func TestRealPiStreamedOutputRebuildsToTheWholeEvents(t *testing.T) {
	h, srv := realPiHarness(t)
	_, d := streamToBoth(t, h, deltaCaps, "faux", func(f *transport.SpawnFrame) {
		f.Env = map[string]string{"PI_FLEET_SERVER": srv.URL}
	}, streamPrompt(2000))
	if d.deltas == 0 || d.refs < 3 {
		t.Fatalf("%d event_delta frames, %d events referring to messages sent before, from the real pi's stream", d.deltas, d.refs)
	}
}
