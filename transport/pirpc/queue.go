package pirpc

import "sync"

// DefaultQueueBytes bounds the lines a Client holds for a slow consumer.
const DefaultQueueBytes = 64 << 20

// lineOverhead is what one queued Line costs beyond its raw bytes.
const lineOverhead = 128

// lineQueue is the ordered backlog between the reader (which must never
// wait on the consumer for long, or pi's output would pile up) and the
// consumer. Its policy:
//
//   - below half the cap everything is queued;
//   - from half the cap on, message_update and tool_execution_update lines
//     are shed: each is superseded by a later line that carries the whole
//     state (message_end, tool_execution_end), so the consumer loses
//     detail, never an outcome. The next queued line counts the shed ones
//     (Line.Shed);
//   - at the cap, the reader waits for the consumer before queueing any
//     other line (responses, ends, settles are never dropped).
//
// Order is always preserved.
type lineQueue struct {
	mu        sync.Mutex
	items     []Line
	head      int
	bytes     int
	shed      int
	max       int
	closed    bool // no more pushes; pop drains what is left
	abandoned bool // the consumer is gone; drop everything
	ready     chan struct{}
	space     chan struct{}
	gone      chan struct{} // closed by abandon
}

func newLineQueue(max int) *lineQueue {
	if max <= 0 {
		max = DefaultQueueBytes
	}
	return &lineQueue{max: max, ready: make(chan struct{}, 1), space: make(chan struct{}, 1), gone: make(chan struct{})}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func sheddable(l *Line) bool {
	return l.Event != nil && (l.Event.Type == EventMessageUpdate || l.Event.Type == EventToolExecutionUpdate)
}

// push queues l, shedding or waiting as the policy says.
func (q *lineQueue) push(l Line) {
	size := len(l.Raw) + lineOverhead
	q.mu.Lock()
	for {
		if q.abandoned || q.closed {
			q.mu.Unlock()
			return
		}
		if sheddable(&l) && q.bytes >= q.max/2 {
			q.shed++
			q.mu.Unlock()
			return
		}
		if q.bytes == 0 || q.bytes+size <= q.max {
			break
		}
		q.mu.Unlock()
		<-q.space
		q.mu.Lock()
	}
	l.Shed, q.shed = q.shed, 0
	q.items = append(q.items, l)
	q.bytes += size
	q.mu.Unlock()
	signal(q.ready)
}

// pop returns the oldest line, waiting for one; ok is false once the queue
// is closed and empty, or abandoned.
func (q *lineQueue) pop() (l Line, ok bool) {
	for {
		q.mu.Lock()
		if q.abandoned {
			q.mu.Unlock()
			return Line{}, false
		}
		if q.head < len(q.items) {
			l = q.items[q.head]
			q.items[q.head] = Line{}
			q.head++
			if q.head == len(q.items) {
				q.items, q.head = q.items[:0], 0
			}
			q.bytes -= len(l.Raw) + lineOverhead
			q.mu.Unlock()
			signal(q.space)
			return l, true
		}
		if q.closed {
			q.mu.Unlock()
			return Line{}, false
		}
		q.mu.Unlock()
		<-q.ready
	}
}

// close ends pushing; queued lines are still delivered.
func (q *lineQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	signal(q.ready)
	signal(q.space)
}

// abandon drops everything: nobody will read any more.
func (q *lineQueue) abandon() {
	q.mu.Lock()
	if !q.abandoned {
		q.abandoned = true
		close(q.gone)
	}
	q.items, q.head, q.bytes = nil, 0, 0
	q.mu.Unlock()
	signal(q.ready)
	signal(q.space)
}
