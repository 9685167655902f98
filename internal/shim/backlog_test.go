package shim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func lineRec(n int) record { return record{kind: recordLine, data: make([]byte, n)} }

func TestBacklogSeqAckAndGet(t *testing.T) {
	b := newBacklog(1 << 20)
	for i := 1; i <= 5; i++ {
		if seq := b.append(lineRec(10)); seq != uint64(i) {
			t.Fatalf("append %d got seq %d", i, seq)
		}
	}
	if b.first() != 1 || b.nextSeq != 6 || b.bytes != 5*(10+recordOverhead) {
		t.Fatalf("first %d next %d bytes %d", b.first(), b.nextSeq, b.bytes)
	}
	b.ack(3)
	if b.first() != 4 || b.ackedThrough != 3 || b.len() != 2 {
		t.Fatalf("after ack 3: first %d acked %d len %d", b.first(), b.ackedThrough, b.len())
	}
	if _, ok := b.get(3); ok {
		t.Error("get(3) after ack 3 found a record")
	}
	if r, ok := b.get(5); !ok || r.seq != 5 {
		t.Errorf("get(5) = %v, %v", r.seq, ok)
	}
	if _, ok := b.get(6); ok {
		t.Error("get(6) beyond the end found a record")
	}
	b.ack(2) // older ack: no effect
	b.ack(99)
	if b.ackedThrough != 5 || b.len() != 0 || b.first() != 6 || b.bytes != 0 {
		t.Errorf("ack beyond the end: acked %d len %d first %d bytes %d", b.ackedThrough, b.len(), b.first(), b.bytes)
	}
	if _, ok := b.missing(1); ok {
		t.Error("acknowledged records reported missing")
	}
}

func TestBacklogDropsOldestAndReportsMissing(t *testing.T) {
	size := 100 + recordOverhead
	b := newBacklog(3 * size)
	for range 5 {
		b.append(lineRec(100))
	}
	if b.first() != 3 || b.dropped != 2 || b.bytes != 3*size {
		t.Fatalf("first %d dropped %d bytes %d", b.first(), b.dropped, b.bytes)
	}
	gap, ok := b.missing(1)
	if !ok || gap != (GapError{From: 1, To: 3}) {
		t.Errorf("missing(1) = %v %v, want 1..3", gap, ok)
	}
	if _, ok := b.missing(3); ok {
		t.Error("missing(3) with 3 kept")
	}
	// A record bigger than the cap is kept alone.
	b.append(lineRec(10 * size))
	if b.len() != 1 || b.first() != 6 || b.dropped != 5 {
		t.Errorf("oversized record: len %d first %d dropped %d", b.len(), b.first(), b.dropped)
	}
	// The exit record never pushes anything out.
	b.append(record{kind: recordExit, exit: &ExitStatus{}})
	if b.len() != 2 || b.dropped != 5 {
		t.Errorf("exit record: len %d dropped %d", b.len(), b.dropped)
	}
	// After an ack, a reader behind it is missing only what was never acked.
	b.ack(6)
	if gap, ok := b.missing(2); ok {
		t.Errorf("missing(2) after ack 6 = %v", gap)
	}
}

func TestBacklogCompacts(t *testing.T) {
	b := newBacklog(1 << 30)
	var want []uint64
	for i := range 5000 {
		b.append(lineRec(1))
		if i%2 == 1 {
			b.ack(uint64(i - 100 + 1))
		}
	}
	if b.recs.Slots() > 2*b.len()+1024 {
		t.Errorf("dead prefix not compacted: %d slots for %d records", b.recs.Slots(), b.len())
	}
	for seq := b.first(); seq < b.nextSeq; seq++ {
		r, ok := b.get(seq)
		if !ok {
			t.Fatalf("get(%d) failed", seq)
		}
		want = append(want, r.seq)
	}
	var seqs []uint64
	for seq := b.first(); seq < b.nextSeq; seq++ {
		seqs = append(seqs, seq)
	}
	if diff := cmp.Diff(seqs, want); diff != "" {
		t.Errorf("records out of place after compaction (-want +got):\n%s", diff)
	}
}
