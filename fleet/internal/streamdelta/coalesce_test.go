package streamdelta

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/transport"
)

// checkCoalesced requires what a server rebuilt from a coalescing batch,
// the events got with their seqs, to be the stream raw with some of its
// updates joined: every event comes in order, an event that follows the
// one before it by one seq is raw's byte for byte, and one that takes the
// place of several (all message_update events of raw) is the last of
// them with their deltas joined as its delta. It returns how many events
// stood for more than one.
func checkCoalesced(t *testing.T, raw, got [][]byte, seqs []uint64) (joined int) {
	t.Helper()
	if len(got) != len(seqs) {
		t.Fatalf("%d events and %d seqs", len(got), len(seqs))
	}
	prev := uint64(0)
	for i, line := range got {
		seq := seqs[i]
		if seq <= prev || seq > uint64(len(raw)) {
			t.Fatalf("event %d has seq %d after %d (the stream has %d)", i, seq, prev, len(raw))
		}
		want := raw[seq-1]
		if seq == prev+1 {
			if !bytes.Equal(line, want) {
				t.Fatalf("event of seq %d:\n got %s\nwant %s", seq, line, want)
			}
			prev = seq
			continue
		}
		joined++
		var deltas strings.Builder
		for s := prev + 1; s <= seq; s++ {
			if k := eventType(raw[s-1]); k != "message_update" {
				t.Fatalf("the event of seq %d (%s) was joined into the one of %d", s, k, seq)
			}
			deltas.WriteString(stepDelta(t, raw[s-1]))
		}
		var gotV, wantV map[string]any
		if err := json.Unmarshal(line, &gotV); err != nil {
			t.Fatalf("event of seq %d: %v\n%s", seq, err, line)
		}
		if err := json.Unmarshal(want, &wantV); err != nil {
			t.Fatal(err)
		}
		wantV["assistantMessageEvent"].(map[string]any)["delta"] = deltas.String()
		if d := cmp.Diff(wantV, gotV); d != "" {
			t.Fatalf("event of seq %d, for seqs %d to %d (-want +got):\n%s", seq, prev+1, seq, d)
		}
		prev = seq
	}
	if last := uint64(len(raw)); prev != last {
		t.Fatalf("the last event has seq %d, want %d", prev, last)
	}
	return joined
}

func stepDelta(t *testing.T, line []byte) string {
	t.Helper()
	var u struct {
		Step struct {
			Delta string `json:"delta"`
		} `json:"assistantMessageEvent"`
	}
	if err := json.Unmarshal(line, &u); err != nil {
		t.Fatal(err)
	}
	return u.Step.Delta
}

// A coalescing batch joins the chunks of a text that wait in one frame,
// and the server rebuilds the last of them with all their deltas: fewer
// events, the same text, every other event as it was.
func TestCoalescedChunksRebuildAsTheLastWithTheirDeltas(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  [][]byte
	}{{"scripted", scriptedStream()}, {"recorded pi", recordedPi(t)}} {
		for _, flush := range []int{1, 2, 3, 64, 1024} {
			got, seqs, wire := relayThrough(t, NewCoalescingBatch("i-1"), tc.raw, flush, nil)
			joined := checkCoalesced(t, tc.raw, got, seqs)
			t.Logf("%s, flush %d: %d events as %d, %d joined; %d bytes on the wire", tc.name, flush, len(tc.raw), len(got), joined, wire)
			if flush == 1 && len(got) != len(tc.raw) {
				t.Errorf("%s: a frame of one update joined something: %d events of %d", tc.name, len(got), len(tc.raw))
			}
			if flush >= 64 && joined == 0 {
				t.Errorf("%s, flush %d: nothing joined", tc.name, flush)
			}
		}
	}
}

// A reconnect mid-run starts the new connection whole, as without
// coalescing, and nothing comes out corrupt.
func TestCoalescedRunAcrossAReconnect(t *testing.T) {
	raw := scriptedStream()
	for i, l := range raw {
		if eventType(l) != "message_update" || eventType(raw[i+1]) != "message_update" {
			continue
		}
		got, seqs, _ := relayThrough(t, NewCoalescingBatch("i-1"), raw, 64, map[int]bool{i + 1: true})
		checkCoalesced(t, raw, got, seqs)
	}
}

// The entries of joined runs, as the batch writes them.
func TestCoalescingBatchWritesJoinedRuns(t *testing.T) {
	s := newPiStream()
	s.start()
	s.text("text", "abc", 1) // no usage changes: the ops only append the delta
	s.end()
	var enc Encoder
	var ch Chain
	b := NewCoalescingBatch("i-1")
	for i, l := range s.lines {
		c := enc.Encode(uint64(i+1), l)
		b.Add(&ch, &c)
	}
	f := b.Frame()
	entries := splitEntries(t, f.Updates)
	// message_start whole, text_start and the first chunk coded long (the
	// shape changes), the two chunks after it joined, text_end,
	// message_end.
	if len(entries) != 6 || !strings.HasPrefix(entries[0], `{"e":`) || !strings.HasPrefix(entries[2], `{"u":`) ||
		entries[3] != `{"c":2,"d":"bc"}` || !strings.HasPrefix(entries[5], `{"n":"message_end"`) {
		t.Fatalf("entries:\n%s", strings.Join(entries, "\n"))
	}
	if f.Seq != 1 || b.Len() != 0 {
		t.Fatalf("frame seq %v, batch left with %d", f.Seq, b.Len())
	}
}

func splitEntries(t *testing.T, updates []byte) []string {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal(updates, &raw); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(raw))
	for i, r := range raw {
		out[i] = string(r)
	}
	return out
}

// A joined run that is not one exactly as the batch writes it, or whose
// chain does not only append the delta, is refused.
func TestBadJoinedRunsAreRefused(t *testing.T) {
	s := newPiStream()
	s.start()
	s.text("text", "abcdefgh", 2)
	var enc Encoder
	var ch Chain
	b := NewBatch("i-1")
	for i, l := range s.lines[:2] { // message_start, the first update
		c := enc.Encode(uint64(i+1), l)
		b.Add(&ch, &c)
	}
	base := b.Frame()
	for _, entry := range []string{
		`{"c":0,"d":"x"}`,
		`{"c":01,"d":"x"}`,
		`{"c":-1,"d":"x"}`,
		`{"c":2.5,"d":"x"}`,
		`{"c":99999999999999999,"d":"x"}`,
		`{"c":9007199254740990,"d":"x"}`, // past 2^53
		`{"c":2}`,
		`{"c":2,"d":"x","e":1}`,
		`{"c":2,"d":1}`,
		`{"d":"x","c":2}`,
	} {
		rb := NewRebuilder(transport.MaxFrameBytes)
		if err := rb.RebuildFrameLines(base, func(uint64, *Line, []byte) {}); err != nil {
			t.Fatal(err)
		}
		two := float64(2)
		f := &transport.EventDeltaFrame{InstanceID: "i-1", Seq: 3, Base: &two, Updates: []byte("[" + entry + "]")}
		err := rb.RebuildFrameLines(f, func(seq uint64, l *Line, _ []byte) {
			t.Errorf("%s: rebuilt seq %d: %s", entry, seq, l.Bytes())
		})
		if !errors.Is(err, ErrBadEntry) && !errors.Is(err, ErrNoBase) {
			t.Errorf("%s: error %v, want a bad entry", entry, err)
		}
	}
}
