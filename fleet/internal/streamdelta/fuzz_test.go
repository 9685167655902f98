package streamdelta

import (
	"encoding/json"
	"testing"

	"example.com/pifleet/transport"
)

// codedFrames returns the updates of the event_delta frames the scripted
// stream makes, after the whole first update (the fuzz targets' base).
func codedFrames() (base []byte, updates [][]byte) {
	raw := scriptedStream()
	var enc Encoder
	var ch Chain
	for i, l := range raw {
		if eventType(l) != "message_update" {
			continue
		}
		c := enc.Encode(uint64(i+1), l)
		b := NewBatch("i-1")
		b.Add(&ch, &c)
		f := b.Frame()
		if base == nil {
			base = f.Updates
			continue
		}
		updates = append(updates, f.Updates)
	}
	return base, updates
}

// FuzzRebuild feeds the rebuilder (which parses what an agent sends)
// arbitrary updates after a real base: it must never panic, and whatever
// it accepts comes out as JSON no larger than a frame.
func FuzzRebuild(f *testing.F) {
	base, updates := codedFrames()
	for _, u := range updates[:20] {
		f.Add(u, true)
	}
	f.Add([]byte(`[{"u":{"type":"text_delta","delta":"x"},"o":[[[1,0,1],"d"],[[5],"k","\"n\"",{"a":[1]}],[[1],"a",[]]]},["y"]]`), true)
	f.Add([]byte(`[{"e":{"type":"message_update"}},[""]]`), false)
	f.Add([]byte(`[["y",1]]`), true)
	// Joined runs (a server that announced event-coalesce gets them).
	f.Add([]byte(`[{"c":3,"d":"ab"},["y"],{"c":2,"d":"\u00e9\n"}]`), true)
	f.Add([]byte(`[{"c":1,"d":""}]`), true)
	// References to the message held (the message_end of seq 100), to one
	// not held, and to a place that is not null.
	f.Add([]byte(`[{"m":{"type":"turn_end","message":null,"toolResults":[null]},"r":[[[1],100],[[2,0],100]]}]`), false)
	f.Add([]byte(`[{"m":{"type":"agent_end","messages":[null]},"r":[[[1,0],99]]},{"m":{"type":"agent_end","messages":[null]},"r":[[[1,0],100]]}]`), false)
	f.Add([]byte(`[{"m":{"type":"turn_end","message":{}},"r":[[[1],100]]}]`), false)
	f.Fuzz(func(t *testing.T, updates []byte, coded bool) {
		const max = 1 << 16
		rb := NewRebuilder(max)
		end := `[{"e":{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"held"}]}}}]`
		if err := rb.Rebuild("i", 100, nil, []byte(end), func(uint64, []byte, []byte) {}); err != nil {
			t.Fatal(err)
		}
		if err := rb.Rebuild("i", 1, nil, base, func(uint64, []byte, []byte) {}); err != nil {
			t.Fatal(err)
		}
		var b *uint64
		if coded {
			one := uint64(1)
			b = &one
		}
		_ = rb.Rebuild("i", 2, b, updates, func(_ uint64, line, _ []byte) {
			if !json.Valid(line) {
				t.Fatalf("rebuilt an event that is not JSON: %q", line)
			}
			if len(line) > max+len(updates) {
				t.Fatalf("rebuilt %d bytes, over the limit", len(line))
			}
		})
	})
}

// FuzzRoundTrip streams arbitrary texts the way pi does: the server must
// rebuild every event byte for byte.
func FuzzRoundTrip(f *testing.F) {
	f.Add("hello world, this is an answer", "ls -la", 16, uint(1000))
	f.Add("\"\\\u2028\x01é🚀", "{\"a\":1}", 1, uint(3))
	f.Fuzz(func(t *testing.T, text, command string, n int, cut uint) {
		if n <= 0 || n > 64 {
			n = 16
		}
		s := fuzzStream(text, command, n)
		// The connection is replaced before one of the events (a
		// reconnect): what the old one held is not referred to.
		got, _ := relay(t, s.lines, 5, map[int]bool{int(cut % uint(len(s.lines)+1)): true})
		if d := len(got) - len(s.lines); d != 0 {
			t.Fatalf("%d events out of %d", len(got), len(s.lines))
		}
		for i := range got {
			if string(got[i]) != string(s.lines[i]) {
				t.Fatalf("event %d differs:\n pi: %s\n got: %s", i, s.lines[i], got[i])
			}
		}
	})
}

// fuzzStream is a run of pi's events streaming text and command in
// chunks of n characters.
func fuzzStream(text, command string, n int) *piStream {
	s := newPiStream()
	s.event(ordered{{"type", "agent_start"}})
	s.user(command + text)
	s.start()
	s.text("thinking", command, n)
	s.text("text", text, n)
	s.toolCall("t1", "bash", ordered{{"command", command}, {"note", text}}, n)
	s.end()
	s.toolResult("t1", text)
	s.turnEnd()
	s.start()
	s.text("text", command, n)
	s.end()
	s.turnEnd()
	s.agentEnd()
	return s
}

// FuzzCoalescedRoundTrip is FuzzRoundTrip through a coalescing batch of
// at most flush updates a frame: the server must rebuild every event but
// the joined ones byte for byte, and each joined one as the last of its
// run with the run's deltas.
func FuzzCoalescedRoundTrip(f *testing.F) {
	f.Add("hello world, this is an answer", "ls -la", 1, uint(1000), uint8(64))
	f.Add("\"\\\u2028\x01é🚀", "{\"a\":1}", 1, uint(3), uint8(2))
	f.Fuzz(func(t *testing.T, text, command string, n int, cut uint, flush uint8) {
		if n <= 0 || n > 64 {
			n = 16
		}
		s := fuzzStream(text, command, n)
		got, seqs, _ := relayThrough(t, NewCoalescingBatch("i-1"), s.lines, int(flush)+1, map[int]bool{int(cut % uint(len(s.lines)+1)): true})
		checkCoalesced(t, s.lines, got, seqs)
	})
}

var _ = transport.MaxFrameBytes
