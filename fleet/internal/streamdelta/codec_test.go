package streamdelta

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
)

// relay runs lines through what an agent does for a server that speaks
// event_delta (an Encoder per worker, a Chain and a Batch per connection,
// the frames through the transport's codec) and what the server does (a
// Rebuilder per connection). It returns the events the server handles, in
// order, and the frames' bytes. newConn lists the indexes of lines before
// which the connection is replaced (a reconnect: new Chain, new
// Rebuilder, same Encoder); flush is how many entries a frame holds at
// most.
func relay(t testing.TB, lines [][]byte, flush int, newConn map[int]bool) (got [][]byte, wire int) {
	t.Helper()
	got, _, wire = relayThrough(t, NewBatch("i-1"), lines, flush, newConn)
	return got, wire
}

// relayThrough is relay with the batch b, and the seq of each event the
// server handles (lines[seq-1] is the event of seq).
func relayThrough(t testing.TB, b *Batch, lines [][]byte, flush int, newConn map[int]bool) (got [][]byte, seqs []uint64, wire int) {
	t.Helper()
	var enc Encoder
	var ch Chain
	rb := NewRebuilder(transport.MaxFrameBytes)
	var (
		out   []*Line // what the server handles, read at the end
		heads [][]byte
	)
	send := func(f transport.Frame) {
		raw, err := transport.MarshalFrame(f)
		if err != nil {
			t.Fatalf("marshal %s: %v", f.FrameType(), err)
		}
		wire += len(raw)
		back, err := transport.ParseFrame(raw)
		if err != nil {
			t.Fatalf("parse %s: %v\n%s", f.FrameType(), err, raw)
		}
		switch fr := back.(type) {
		case *transport.EventDeltaFrame:
			// Every other event is read at once, the rest once the whole
			// stream is rebuilt: a Line read late reads as it would have
			// when it came out.
			if err := rb.RebuildFrameLines(fr, func(seq uint64, line *Line, head []byte) {
				if len(out)%2 == 0 {
					line.Bytes()
				}
				out, heads = append(out, line), append(heads, head)
				seqs = append(seqs, seq)
			}); err != nil {
				t.Fatalf("rebuild: %v\n%s", err, raw)
			}
		case *transport.EventFrame:
			out, heads = append(out, WholeLine(fr.Event)), append(heads, nil)
			seqs = append(seqs, uint64(*fr.Seq))
		}
	}
	flushBatch := func() {
		if f := b.Frame(); f != nil {
			send(f)
		}
	}
	for i, line := range lines {
		seq := uint64(i + 1)
		if newConn[i] {
			flushBatch()
			ch.Reset()
			rb = NewRebuilder(transport.MaxFrameBytes)
		}
		switch kind := eventType(line); {
		case Carries(kind, true):
			c := enc.Encode(seq, line)
			if !b.Fits(seq) {
				flushBatch()
			}
			b.Add(&ch, &c)
			if b.Len() >= flush {
				flushBatch()
			}
		default:
			flushBatch()
			s := float64(seq)
			send(&transport.EventFrame{InstanceID: "i-1", Event: line, Seq: &s})
		}
	}
	flushBatch()
	for i, l := range out {
		got = append(got, l.Bytes())
		checkHead(t, l.Bytes(), heads[i])
	}
	return got, seqs, wire
}

// checkHead requires a rebuilt update's head to read as the update does
// for pirpc (what the server takes from it instead of the whole line).
func checkHead(t testing.TB, line, head []byte) {
	t.Helper()
	if head == nil {
		return
	}
	want, err := pirpc.ParseValidRecord(line)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pirpc.ParseValidRecord(head)
	if err != nil {
		t.Fatalf("head %s: %v", head, err)
	}
	if d := cmp.Diff(want.Event, got.Event); d != "" {
		t.Fatalf("head reads otherwise than the update (-update +head):\n%s", d)
	}
}

func asStrings(lines [][]byte) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l)
	}
	return out
}

func asValues(t *testing.T, lines [][]byte) []any {
	out := make([]any, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal(l, &out[i]); err != nil {
			t.Fatalf("event %d is not JSON: %v", i, err)
		}
	}
	return out
}

// checkSame requires the rebuilt events to be the raw ones, byte for byte
// and as values.
func checkSame(t *testing.T, raw, got [][]byte) {
	t.Helper()
	if d := cmp.Diff(asValues(t, raw), asValues(t, got)); d != "" {
		t.Fatalf("rebuilt events differ from pi's (-pi +rebuilt):\n%s", d)
	}
	if d := cmp.Diff(asStrings(raw), asStrings(got)); d != "" {
		t.Fatalf("rebuilt events differ from pi's bytes (-pi +rebuilt):\n%s", d)
	}
}

func rawSize(lines [][]byte) int {
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	return n
}

func TestScriptedStreamRebuildsIdentically(t *testing.T) {
	raw := scriptedStream()
	for _, flush := range []int{1, 3, 64} {
		got, wire := relay(t, raw, flush, nil)
		checkSame(t, raw, got)
		t.Logf("flush %d: %d events, %d bytes of events, %d bytes on the wire", flush, len(raw), rawSize(raw), wire)
		if wire*5 > rawSize(raw) {
			t.Errorf("flush %d: %d bytes on the wire for %d bytes of events: want at least 5× less", flush, wire, rawSize(raw))
		}
	}
}

func TestRecordedPiStreamRebuildsIdentically(t *testing.T) {
	raw := recordedPi(t)
	got, _ := relay(t, raw, 8, nil)
	checkSame(t, raw, got)
	// The codec must have coded pi's own updates, not sent them whole.
	var enc Encoder
	coded := 0
	for i, l := range raw {
		if c := enc.Encode(uint64(i+1), l); c.delta != nil {
			coded++
		}
	}
	if coded < 30 {
		t.Errorf("%d of pi's 45 message_update events coded; want most", coded)
	}
}

// A connection that is replaced mid-answer starts with the whole event:
// the new server side has no base, and no event comes out corrupt.
func TestReconnectMidAnswerStartsWhole(t *testing.T) {
	raw := scriptedStream()
	for _, at := range []int{5, 20, 21, 37, len(raw) - 3} {
		got, _ := relay(t, raw, 4, map[int]bool{at: true})
		checkSame(t, raw, got)
	}
}

// A coded update the receiver has no base for (a gap, a new connection, a
// lost frame) is refused, never applied to something else.
func TestCodedUpdateWithoutItsBaseIsRefused(t *testing.T) {
	raw := scriptedStream()
	var enc Encoder
	var ch Chain
	var frames []*transport.EventDeltaFrame
	for i, l := range raw[:12] {
		if eventType(l) != "message_update" {
			continue
		}
		c := enc.Encode(uint64(i+1), l)
		b := NewBatch("i-1")
		b.Add(&ch, &c)
		frames = append(frames, b.Frame())
	}
	rb := NewRebuilder(transport.MaxFrameBytes)
	// Skip the whole first update: the second has nothing to apply to.
	err := rb.RebuildFrame(frames[1], func(*transport.EventFrame, []byte) { t.Fatal("an event came out") })
	if !errors.Is(err, ErrNoBase) {
		t.Fatalf("err = %v, want ErrNoBase", err)
	}
	// In order it works; then a frame seen twice is refused too.
	rb = NewRebuilder(transport.MaxFrameBytes)
	for _, f := range frames[:3] {
		if err := rb.RebuildFrame(f, func(*transport.EventFrame, []byte) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rb.RebuildFrame(frames[2], func(*transport.EventFrame, []byte) {}); !errors.Is(err, ErrNoBase) {
		t.Fatalf("replayed frame: err = %v, want ErrNoBase", err)
	}
}

// recordedPi is the events of pi's recorded transcript.
func recordedPi(t *testing.T) [][]byte {
	t.Helper()
	f, err := os.Open("../../../transport/pirpc/testdata/pi-0.73.1-transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var raw [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		raw = append(raw, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return raw
}

// turn_end and agent_end repeat the messages their connection carried:
// they travel as references to them, a few dozen bytes each instead of
// the messages again.
func TestRepeatedMessagesTravelAsReferences(t *testing.T) {
	for name, raw := range map[string][][]byte{"scripted": scriptedStream(), "recorded pi": recordedPi(t)} {
		t.Run(name, func(t *testing.T) {
			var enc Encoder
			var ch Chain
			repeats := 0
			for i, l := range raw {
				c := enc.Encode(uint64(i+1), l)
				entry, _ := ch.Pick(&c)
				switch eventType(l) {
				case "turn_end", "agent_end":
					repeats++
					if !bytes.HasPrefix(entry, []byte(`{"m":`)) || len(entry)*4 > len(l) {
						t.Errorf("event %d (%d bytes) went as %d bytes: %.200s", i, len(l), len(entry), entry)
					}
				}
			}
			if repeats < 4 {
				t.Fatalf("%d turn_end and agent_end events: the stream does not test references", repeats)
			}
		})
	}
}

// A reference the server cannot resolve (a message it never got, one an
// agent_end let go, a new connection) is refused, and nothing comes out.
func TestReferenceToAMessageNotHeldIsRefused(t *testing.T) {
	end := []byte(`[{"e":{"type":"message_end","message":{"role":"user","content":"hi"}}}]`)
	turnEnd := []byte(`[{"m":{"type":"turn_end","message":null,"toolResults":[]},"r":[[[1],7]]}]`)
	nothing := func(uint64, []byte, []byte) { t.Fatal("an event came out") }
	rb := NewRebuilder(transport.MaxFrameBytes)
	if err := rb.Rebuild("i-1", 8, nil, turnEnd, nothing); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("reference on a new connection: err = %v, want ErrNotHeld", err)
	}
	if err := rb.Rebuild("i-1", 7, nil, end, func(uint64, []byte, []byte) {}); err != nil {
		t.Fatal(err)
	}
	if err := rb.Rebuild("i-2", 8, nil, turnEnd, nothing); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("reference to another worker's message: err = %v, want ErrNotHeld", err)
	}
	var got []byte
	if err := rb.Rebuild("i-1", 8, nil, turnEnd, func(_ uint64, line, _ []byte) { got = line }); err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"turn_end","message":{"role":"user","content":"hi"},"toolResults":[]}`; string(got) != want {
		t.Fatalf("rebuilt %s, want %s", got, want)
	}
	for _, bad := range []string{
		`[{"m":{"type":"turn_end","message":{}},"r":[[[1],7]]}]`,           // not a null
		`[{"m":{"type":"turn_end","message":null},"r":[[[2],7]]}]`,         // off the line
		`[{"m":{"type":"turn_end","message":null},"r":[[[1],7],[[1],7]]}]`, // twice
		`[{"m":{"type":"turn_end","message":null},"r":[[[],7]]}]`,          // the line itself
		`[{"m":{"type":"turn_end","message":null},"r":[[[1],-7]]}]`,        // not a seq
		`[{"m":{"type":"turn_end","message":null},"r":[[[1],7]],"x":1}]`,   // unknown member
		`[{"m":{"type":"turn_end","message":null},"r":[[[1]]]}]`,           // no seq
	} {
		if err := rb.Rebuild("i-1", 9, nil, []byte(bad), nothing); !errors.Is(err, ErrBadEntry) {
			t.Errorf("%s: err = %v, want ErrBadEntry", bad, err)
		}
	}
	// An agent_end lets go of everything the connection held.
	agentEnd := []byte(`[{"m":{"type":"agent_end","messages":[null]},"r":[[[1,0],7]]}]`)
	if err := rb.Rebuild("i-1", 10, nil, agentEnd, func(uint64, []byte, []byte) {}); err != nil {
		t.Fatal(err)
	}
	if err := rb.Rebuild("i-1", 11, nil, turnEnd, nothing); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("reference after agent_end: err = %v, want ErrNotHeld", err)
	}
	// A reference that would make a line larger than a frame.
	small := NewRebuilder(100)
	big := []byte(`[{"e":{"type":"message_end","message":{"content":"` + strings.Repeat("x", 80) + `"}}}]`)
	if err := small.Rebuild("i-1", 7, nil, big, func(uint64, []byte, []byte) {}); err != nil {
		t.Fatal(err)
	}
	if err := small.Rebuild("i-1", 8, nil, []byte(`[{"m":{"type":"turn_end","a":null,"b":null},"r":[[[1],7],[[2],7]]}]`), nothing); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

// The agent and the server let go of the oldest messages of a long run
// alike, so that the agent never refers to one the server dropped: a
// turn_end repeating more than a connection holds refers to the newest
// ones and carries the others as they are.
func TestALongRunRefersOnlyToWhatTheServerHolds(t *testing.T) {
	s := newPiStream()
	s.event(ordered{{"type", "agent_start"}})
	s.user("go")
	for i := range heldCount + 40 {
		s.toolResult(fmt.Sprintf("t%d", i), strings.Repeat("r", 100))
	}
	s.turnEnd() // past the count: the first 40 results go as they are
	const big = 900 << 10
	var bigs []json.RawMessage
	for i := range 5 {
		s.toolResult(fmt.Sprintf("big%d", i), strings.Repeat("B", big))
		bigs = append(bigs, s.turn[0])
		s.turnEnd()
	}
	// Past the bytes: the first big result is gone, the last is held.
	s.turn = bigs[:1]
	s.turnEnd()
	s.turn = bigs[4:]
	s.turnEnd()
	got, wire := relay(t, s.lines, 1, nil)
	checkSame(t, s.lines, got)
	t.Logf("%d bytes of events, %d on the wire", rawSize(s.lines), wire)
	var enc Encoder
	var ch Chain
	var refs []int
	for i, l := range s.lines {
		c := enc.Encode(uint64(i+1), l)
		entry, _ := ch.Pick(&c)
		if eventType(l) == "turn_end" {
			var e struct{ R []json.RawMessage }
			if err := json.Unmarshal(entry, &e); err != nil {
				t.Fatal(err)
			}
			refs = append(refs, len(e.R))
		}
	}
	if want := []int{heldCount, 1, 1, 1, 1, 1, 0, 1}; !slices.Equal(refs, want) {
		t.Errorf("the turn_end events refer to %v messages, want %v", refs, want)
	}
}

// A text's first delta is the whole text so far: when it is long enough
// to travel as a reference into the partial message, the step must still
// carry it, since op d appends it (the server refused such an update and
// closed the connection).
func TestALongFirstDeltaIsNotAReference(t *testing.T) {
	text := strings.Repeat("0123456789", 10)
	for _, chunk := range []int{refMin, 64, 100} {
		lines := answerLines(text, chunk)
		got, _ := relay(t, lines, 3, nil)
		checkSame(t, lines, got)
	}
}
