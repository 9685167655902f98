package streamdelta

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
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
	var enc Encoder
	var ch Chain
	b := NewBatch("i-1")
	rb := NewRebuilder(transport.MaxFrameBytes)
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
			if err := rb.RebuildFrame(fr, func(ef *transport.EventFrame, head []byte) {
				got = append(got, ef.Event)
				checkHead(t, ef.Event, head)
			}); err != nil {
				t.Fatalf("rebuild: %v\n%s", err, raw)
			}
		case *transport.EventFrame:
			got = append(got, fr.Event)
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
		switch eventType(line) {
		case "message_start", "message_update", "message_end":
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
	return got, wire
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
