package shim

import "example.com/pifleet/internal/fifo"

// recordKind says what a stream record is.
type recordKind uint8

const (
	recordLine recordKind = iota + 1
	recordOverlong
	recordExit
)

// record is one item of a shim's output stream. Records are immutable once
// appended, so a session may send one without holding the server's lock.
type record struct {
	seq      uint64
	kind     recordKind
	data     []byte      // recordLine
	chunk    *chunk      // recordLine: what data is a slice of, if recycled
	overlong int64       // recordOverlong: the dropped line's length
	exit     *ExitStatus // recordExit
}

// recordOverhead is what a record costs beyond its data, counted against
// the byte cap so that a flood of empty lines is bounded too.
const recordOverhead = 64

func (r record) size() int { return len(r.data) + recordOverhead }

// backlog is the shim's stream of records not yet acknowledged: seqs are
// handed out here, acknowledged records are discarded, and when the byte cap
// is exceeded the oldest records are dropped (later reported as a gap). It
// is not safe for concurrent use; the server guards it.
type backlog struct {
	limit        int
	recs         fifo.Queue[record] // in seq order, contiguous
	bytes        int
	nextSeq      uint64
	ackedThrough uint64
	dropped      uint64
}

func newBacklog(limit int) *backlog {
	return &backlog{limit: limit, nextSeq: 1}
}

// append gives r the next seq and keeps it, dropping the oldest records
// while the cap would be exceeded. A record larger than the cap is kept on
// its own; the exit record never causes a drop (it is small and last).
func (b *backlog) append(r record) uint64 {
	r.seq = b.nextSeq
	b.nextSeq++
	size := r.size()
	if r.kind != recordExit {
		for b.len() > 0 && b.bytes+size > b.limit {
			b.popFront()
			b.dropped++
		}
	}
	b.recs.Push(r)
	b.bytes += size
	return r.seq
}

// ack discards every record up to and including seq.
func (b *backlog) ack(seq uint64) {
	if seq >= b.nextSeq {
		seq = b.nextSeq - 1
	}
	if seq <= b.ackedThrough {
		return
	}
	b.ackedThrough = seq
	for b.len() > 0 && b.recs.At(0).seq <= seq {
		b.popFront()
	}
}

// first is the oldest seq still kept, or nextSeq when nothing is.
func (b *backlog) first() uint64 {
	if b.len() == 0 {
		return b.nextSeq
	}
	return b.recs.At(0).seq
}

// get returns the record with that seq, if it is still kept.
func (b *backlog) get(seq uint64) (record, bool) {
	first := b.first()
	if seq < first || seq >= b.nextSeq {
		return record{}, false
	}
	return *b.recs.At(int(seq - first)), true
}

// missing returns the lost range a reader positioned at seq would skip:
// seqs never acknowledged and no longer kept. ok is false when there is none.
func (b *backlog) missing(seq uint64) (gap GapError, ok bool) {
	from := max(seq, b.ackedThrough+1)
	to := b.first()
	if from >= to {
		return GapError{}, false
	}
	return GapError{From: from, To: to}, true
}

func (b *backlog) len() int { return b.recs.Len() }

func (b *backlog) popFront() {
	r := b.recs.Pop()
	b.bytes -= r.size()
	r.chunk.release()
}
