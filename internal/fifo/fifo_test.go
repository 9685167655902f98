package fifo

import (
	"fmt"
	"testing"
)

func ExampleQueue() {
	var q Queue[string]
	q.Push("first")
	q.Push("second")
	fmt.Println(q.Len(), *q.At(1))
	fmt.Println(q.Pop(), q.Pop(), q.Len())
	// Output:
	// 2 second
	// first second 0
}

// Items come out in the order they went in, whether the queue runs empty
// between them or never does, and the array follows the live part.
func TestAQueueKeepsOrderAndStaysSmall(t *testing.T) {
	var q Queue[int]
	next, want := 0, 0
	pop := func() {
		if got := q.Pop(); got != want {
			t.Fatalf("popped %d, want %d", got, want)
		}
		want++
	}
	// Never empty: 3 in, 2 out, 10,000 times.
	for range 10_000 {
		for range 3 {
			q.Push(next)
			next++
		}
		pop()
		pop()
		if q.Slots() > 2*q.Len()+compactAfter+3 {
			t.Fatalf("%d slots for %d items: the dead prefix was not compacted", q.Slots(), q.Len())
		}
	}
	for q.Len() > 0 {
		pop()
	}
	if q.Slots() != 0 {
		t.Errorf("an empty queue holds %d slots, want 0 (it starts again at the front)", q.Slots())
	}
	// At reads from the front.
	q.Push(next)
	q.Push(next + 1)
	if *q.At(0) != next || *q.At(1) != next+1 {
		t.Errorf("At(0), At(1) = %d, %d; want %d, %d", *q.At(0), *q.At(1), next, next+1)
	}
}

// A popped slot is cleared: the queue does not keep what it handed out.
func TestPopClearsTheSlot(t *testing.T) {
	var q Queue[*int]
	v := 1
	q.Push(&v)
	q.Push(&v)
	q.Pop()
	if q.items[0] != nil {
		t.Error("the popped slot still points at the item")
	}
}

// The queue hands items out in order whether it runs empty (and reuses its
// array) or stays long (and moves its live part down).
func TestFIFOKeepsOrder(t *testing.T) {
	var q Queue[uint64]
	var pushed, popped uint64
	peak := 0
	for round := range 40 {
		n := 1 + round*round*7 // some rounds leave the queue long
		for range n {
			pushed++
			q.Push(pushed)
		}
		peak = max(peak, q.Len())
		keep := round % 3 * 500 // and some leave it non-empty
		for q.Len() > keep {
			popped++
			if got := q.Pop(); got != popped {
				t.Fatalf("round %d: popped %d, want %d", round, got, popped)
			}
		}
		if q.Len() != int(pushed-popped) {
			t.Fatalf("round %d: len %d, want %d", round, q.Len(), pushed-popped)
		}
	}
	// The array follows the longest the queue was, not all it ever held.
	if cap(q.items) > 4*peak {
		t.Fatalf("array of %d items for a queue at most %d long (%d pushed)", cap(q.items), peak, pushed)
	}
}
