package dialer

// retryHeap is the retry queue: a 4-ary min-heap of records ordered by
// next-dial time, then creation order. Every record stores its own index,
// so a record is on the heap at most once, a changed time is a Fix rather
// than a second Push, and a deleted record leaves the heap with it (the
// upstream CtrlDialer had none of these, §1.13 #1 and #7 of the notes).
//
// Each slot carries a copy of its record's sort key, so that sifting
// compares within the slice instead of loading records: with 100,000
// records scattered over the heap, those loads are cache misses. Four
// children per node halve the depth (9 levels for 100,000 records instead
// of 17) and sit in adjacent slots, so a sift touches half the cache lines
// of a binary heap.
// It is written out rather than built on container/heap to keep the
// per-event cost free of interface calls.
type retryHeap []heapSlot

type heapSlot struct {
	at    instant // the record's nextDial when it was scheduled
	order uint64  // the record's creation order
	r     *record
}

func (h retryHeap) less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.at != b.at {
		return a.at < b.at
	}
	return a.order < b.order
}

func (h retryHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].r.heapIndex = int32(i)
	h[j].r.heapIndex = int32(j)
}

const heapArity = 4

func (h retryHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / heapArity
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts i towards the leaves and reports whether it moved.
func (h retryHeap) down(i int) bool {
	start := i
	n := len(h)
	for {
		first := heapArity*i + 1
		if first >= n {
			break
		}
		child := first
		for c := first + 1; c < min(first+heapArity, n); c++ {
			if h.less(c, child) {
				child = c
			}
		}
		if !h.less(child, i) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}

// schedule puts r on the heap at r.nextDial, or moves it there if it is
// already on it.
func (h *retryHeap) schedule(r *record) {
	if i := int(r.heapIndex); i >= 0 {
		(*h)[i].at = r.nextDial
		if !h.down(i) {
			h.up(i)
		}
		return
	}
	r.heapIndex = int32(len(*h))
	*h = append(*h, heapSlot{at: r.nextDial, order: r.order, r: r})
	h.up(len(*h) - 1)
}

// remove takes r off the heap; it is a no-op when r is not on it.
func (h *retryHeap) remove(r *record) {
	i := int(r.heapIndex)
	if i < 0 {
		return
	}
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = heapSlot{}
	*h = (*h)[:last]
	r.heapIndex = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

// peek returns the record due first, or nil.
func (h retryHeap) peek() *record {
	if len(h) == 0 {
		return nil
	}
	return h[0].r
}
