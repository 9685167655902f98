package transport

import "sync"

// inbox holds the frames the reader received for the handler, in order:
// a queue bounded at max frames, like a channel of that capacity, whose
// memory follows what waits in it instead (an idle connection's inbox is
// empty, where a 1,024-frame channel holds 16 KiB). One goroutine puts,
// one takes: a caller of take, or, once deliverTo was called, a delivery
// goroutine that runs only while frames wait.
type inbox struct {
	max    int
	mu     sync.Mutex
	frames []Frame // frames[head:] wait
	head   int
	closed bool
	ready  chan struct{} // signalled after a put and at close
	room   chan struct{} // signalled after a take

	deliver    func() // started on a goroutine when frames wait (deliverTo)
	delivering bool   // a deliver goroutine runs: it takes until next says none
}

func newInbox(max int) *inbox {
	return &inbox{max: max, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// signal wakes whoever waits on ch, or leaves the wake-up for its next
// wait.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// put adds f, waiting while max frames wait; it gives up (false) when
// done is closed first.
func (q *inbox) put(f Frame, done <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if n := len(q.frames) - q.head; n < q.max {
			if q.head > 0 && len(q.frames) == cap(q.frames) {
				copy(q.frames, q.frames[q.head:]) // reuse the taken front
				clear(q.frames[n:])
				q.frames, q.head = q.frames[:n], 0
			}
			q.frames = append(q.frames, f)
			start, run := q.startLocked(), q.deliver
			q.mu.Unlock()
			signal(q.ready)
			if start {
				go run()
			}
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-done:
			return false
		}
	}
}

// close marks the end: take returns what waits, then reports the end.
func (q *inbox) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.ready)
}

// take returns the next frame, waiting for one. ok is false once the
// inbox is closed and empty, or when cancel is closed first (cancelled).
func (q *inbox) take(cancel <-chan struct{}) (f Frame, ok, cancelled bool) {
	for {
		q.mu.Lock()
		if q.head < len(q.frames) {
			f = q.popLocked()
			q.mu.Unlock()
			signal(q.room)
			return f, true, false
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return nil, false, false
		}
		select {
		case <-q.ready:
		case <-cancel:
			return nil, false, true
		}
	}
}

// deliverTo hands the frames to run from now on: a goroutine running run
// starts whenever frames wait and none runs, and takes them with next
// until none is left. An idle connection so has no goroutine waiting for
// frames, which counts when a server holds thousands of them.
func (q *inbox) deliverTo(run func()) {
	q.mu.Lock()
	q.deliver = run
	start := q.startLocked()
	q.mu.Unlock()
	if start {
		go run()
	}
}

// startLocked says whether a deliver goroutine is to start now (and
// counts it as running).
func (q *inbox) startLocked() bool {
	if q.deliver == nil || q.delivering || q.head == len(q.frames) {
		return false
	}
	q.delivering = true
	return true
}

// next returns the next waiting frame to the deliver goroutine, or false
// when none waits: that goroutine is to return, and the next put starts
// another.
func (q *inbox) next() (Frame, bool) {
	q.mu.Lock()
	if q.head == len(q.frames) {
		q.delivering = false
		q.mu.Unlock()
		return nil, false
	}
	f := q.popLocked()
	q.mu.Unlock()
	signal(q.room)
	return f, true
}

// popLocked removes and returns the first waiting frame; one waits.
func (q *inbox) popLocked() Frame {
	f := q.frames[q.head]
	q.frames[q.head] = nil
	q.head++
	if q.head == len(q.frames) { // empty: start over, small
		q.head = 0
		if cap(q.frames) > 64 {
			q.frames = nil
		} else {
			q.frames = q.frames[:0]
		}
	}
	return f
}
