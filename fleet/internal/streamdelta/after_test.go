package streamdelta

import (
	"bytes"
	"testing"

	"example.com/pifleet/transport"
)

// rebuiltLines runs lines through an agent's encoding and a server's
// rebuilding (as relay does) and returns the server's Lines, unread.
func rebuiltLines(t *testing.T, lines [][]byte, flush int) []*Line {
	t.Helper()
	var enc Encoder
	var ch Chain
	b := NewBatch("i-1")
	rb := NewRebuilder(transport.MaxFrameBytes)
	var out []*Line
	flushBatch := func() {
		if f := b.Frame(); f != nil {
			if err := rb.RebuildFrameLines(f, func(_ uint64, l *Line, _ []byte) { out = append(out, l) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, line := range lines {
		seq := uint64(i + 1)
		if !Carries(eventType(line), true) {
			flushBatch()
			out = append(out, WholeLine(line))
			continue
		}
		c := enc.Encode(seq, line)
		if !b.Fits(seq) {
			flushBatch()
		}
		b.Add(&ch, &c)
		if b.Len() >= flush {
			flushBatch()
		}
	}
	flushBatch()
	return out
}

// A relay that got the line before sends DeltaAfter's entry instead of
// the line: a reader that rebuilds from that line and the entry alone gets
// the line byte for byte, and the entries stay as small as a chunk.
func TestDeltaAfterRebuildsFromThePreviousLineAlone(t *testing.T) {
	raw := scriptedStream()
	for _, flush := range []int{1, 7} {
		lines := rebuiltLines(t, raw, flush)
		coded, entries, whole := 0, 0, 0
		for i := 1; i < len(lines); i++ {
			entry, ok := lines[i].DeltaAfter(lines[i-1])
			if eventType(raw[i]) != "message_update" {
				if ok {
					t.Fatalf("line %d (%s) has a delta", i, eventType(raw[i]))
				}
				continue
			}
			if !ok {
				continue
			}
			coded++
			if _, ok := lines[i].DeltaAfter(lines[i]); ok {
				t.Fatalf("line %d is a delta after itself", i)
			}
			entries, whole = entries+len(entry), whole+len(raw[i])
			// The reader's side: the line before, whole, then the entry.
			rb := NewRebuilder(transport.MaxFrameBytes)
			prev := append(append([]byte(`[{"e":`), lines[i-1].Bytes()...), "}]"...)
			if err := rb.Rebuild("r", 1, nil, prev, func(uint64, []byte, []byte) {}); err != nil {
				t.Fatal(err)
			}
			one := uint64(1)
			var got []byte
			if err := rb.Rebuild("r", 2, &one, append(append([]byte{'['}, entry...), ']'), func(_ uint64, l, _ []byte) { got = l }); err != nil {
				t.Fatalf("line %d: %v\n%s", i, err, entry)
			}
			if !bytes.Equal(got, raw[i]) {
				t.Fatalf("line %d rebuilt as\n%s\nwant\n%s", i, got, raw[i])
			}
		}
		if coded < len(raw)/2 {
			t.Fatalf("flush %d: %d of %d lines have a delta", flush, coded, len(raw))
		}
		if entries*10 > whole {
			t.Fatalf("flush %d: the deltas are %d bytes for %d bytes of lines", flush, entries, whole)
		}
	}
}
