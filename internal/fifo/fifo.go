// Package fifo is a first-in, first-out queue on a slice that does not
// grow with everything ever queued: it starts again at the front of its
// array whenever it runs empty (as a queue that keeps up does all the
// time), and moves its live part down once the dead prefix dominates (for
// one that never runs empty). A slice popped from the front instead is
// reallocated every few hundred items, and keeps what it popped alive
// until then.
package fifo

// compactAfter is how many popped slots a queue may hold before it moves
// its live part down (once they are also most of the array).
const compactAfter = 1024

// Queue is a FIFO of T. The zero value is an empty queue; it is not safe
// for concurrent use.
type Queue[T any] struct {
	items []T // items[head:] are queued
	head  int
}

// Len is the number of items queued.
func (q *Queue[T]) Len() int { return len(q.items) - q.head }

// Push queues v last.
func (q *Queue[T]) Push(v T) { q.items = append(q.items, v) }

// At returns a pointer to the i-th item from the front (0 is the oldest),
// valid until the next Push or Pop. i must be below Len.
func (q *Queue[T]) At(i int) *T { return &q.items[q.head+i] }

// Pop removes the oldest item and returns it; the queue must not be
// empty. Its slot is cleared, so the queue keeps nothing it handed out.
func (q *Queue[T]) Pop() T {
	v := q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head > compactAfter && q.head*2 > len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return v
}

// Slots is how many items' room the queue holds on to: the live ones and
// the popped slots not yet reclaimed.
func (q *Queue[T]) Slots() int { return len(q.items) }
