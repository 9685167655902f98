package dialer

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The heap against a sorted slice, through random schedule, reschedule and
// remove operations.
func TestRetryHeap_AgreesWithSortedOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	recs := make([]*record, 200)
	for i := range recs {
		recs[i] = &record{order: uint64(i), heapIndex: -1}
	}
	var h retryHeap
	for range 50000 {
		r := recs[rng.IntN(len(recs))]
		if rng.IntN(3) == 0 {
			h.remove(r)
		} else {
			r.nextDial = time.Duration(rng.IntN(100)) * time.Second
			h.schedule(r)
		}
	}
	var want []*record
	for _, r := range recs {
		if r.heapIndex >= 0 {
			want = append(want, r)
		}
	}
	slices.SortFunc(want, func(a, b *record) int {
		if a.nextDial != b.nextDial {
			return int(a.nextDial - b.nextDial)
		}
		return int(a.order) - int(b.order)
	})
	if len(h) != len(want) {
		t.Fatalf("heap holds %d, want %d", len(h), len(want))
	}
	for i, w := range want {
		got := h.peek()
		if got != w {
			t.Fatalf("pop %d: record %d due %v, want %d due %v", i, got.order, got.nextDial, w.order, w.nextDial)
		}
		h.remove(got)
	}
	if h.peek() != nil {
		t.Error("heap not empty")
	}
}
