package worker

// ring keeps the last events of a worker for a server that reconnects.
// It is not safe for concurrent use; the Worker guards it.
type ring struct {
	buf     []Event
	start   int    // index of the oldest event
	n       int    // events held
	evicted uint64 // seq of the last event pushed out, 0 if none
}

func newRing(size int) *ring {
	if size <= 0 {
		size = DefaultRingSize
	}
	return &ring{buf: make([]Event, size)}
}

func (r *ring) push(ev Event) {
	if r.n == len(r.buf) {
		r.evicted = r.buf[r.start].Seq
		r.buf[r.start] = ev
		r.start = (r.start + 1) % len(r.buf)
		return
	}
	r.buf[(r.start+r.n)%len(r.buf)] = ev
	r.n++
}

// since returns the events after seq, the seq of the oldest event held
// (0 when empty), and whether events after seq were already pushed out.
func (r *ring) since(seq uint64) (events []Event, firstSeq uint64, gap bool) {
	if r.n > 0 {
		firstSeq = r.buf[r.start].Seq
	}
	for i := range r.n {
		ev := r.buf[(r.start+i)%len(r.buf)]
		if ev.Seq > seq {
			events = append(events, ev)
		}
	}
	return events, firstSeq, seq < r.evicted
}
