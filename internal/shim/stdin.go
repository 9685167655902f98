//go:build unix

package shim

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// stdinLimit bounds the bytes queued for the worker's stdin; a message that
// would exceed it is refused whole (ErrBusy). A Client keeps one Write in
// flight, so only a worker that stops reading its input while Writes are
// abandoned (or several agents write at once) reaches it.
const stdinLimit = 2 * MaxWrite

// stdinQueue feeds the worker's stdin from one goroutine, in the order
// requests arrived, so that a worker that does not read its input blocks
// only this queue, never the connection that also carries signals.
type stdinQueue struct {
	f    *os.File
	raw  syscall.RawConn // f's descriptor, for the non-blocking fast path
	kick chan struct{}
	quit chan struct{}

	mu      sync.Mutex
	ops     []stdinOp
	bytes   int
	busy    bool // run is carrying out an operation
	closing bool // close_stdin accepted: no more writes
	stopped bool // the worker exited: nothing is accepted
}

type stdinOp struct {
	data  []byte
	close bool
	done  func(error) // may be nil
}

// newStdinQueue takes f, the shim's end of the worker's stdin pipe (which
// os.Pipe made non-blocking), and its raw descriptor.
func newStdinQueue(f *os.File, raw syscall.RawConn) *stdinQueue {
	return &stdinQueue{f: f, raw: raw, kick: make(chan struct{}, 1), quit: make(chan struct{})}
}

// write writes data to the worker's stdin, or queues what the pipe does
// not take at once. done is called once all of it is in the pipe; a nil
// return with done not yet called means it is queued. An error is returned
// instead of calling done.
func (q *stdinQueue) write(data []byte, done func(error)) error {
	q.mu.Lock()
	switch {
	case q.stopped:
		q.mu.Unlock()
		return ErrExited
	case q.closing:
		q.mu.Unlock()
		return ErrStdinClosed
	case q.bytes > 0 && q.bytes+len(data) > stdinLimit:
		q.mu.Unlock()
		return ErrBusy
	}
	if len(q.ops) == 0 && !q.busy {
		// Nothing is ahead of data: try the pipe now and spare the hand-off
		// to run (the common case: the worker reads its input).
		n, err := q.tryWrite(data)
		if err != nil {
			q.mu.Unlock()
			return err
		}
		if data = data[n:]; len(data) == 0 {
			q.mu.Unlock()
			done(nil)
			return nil
		}
	}
	q.ops = append(q.ops, stdinOp{data: data, done: done})
	q.bytes += len(data)
	q.notify()
	q.mu.Unlock()
	return nil
}

// tryWrite writes what the pipe takes without waiting.
func (q *stdinQueue) tryWrite(p []byte) (int, error) {
	var n int
	var err error
	if rerr := q.raw.Write(func(fd uintptr) bool {
		n, err = syscall.Write(int(fd), p)
		return true // one attempt; run does the waiting
	}); rerr != nil {
		return 0, ErrExited
	}
	switch {
	case err == syscall.EAGAIN:
		return 0, nil
	case errors.Is(err, syscall.EPIPE):
		return 0, ErrExited
	case err != nil:
		return 0, err
	}
	return n, nil
}

// close queues the closing of stdin after the writes already queued.
// Closing twice is fine.
func (q *stdinQueue) close(done func(error)) error {
	q.mu.Lock()
	switch {
	case q.stopped:
		q.mu.Unlock()
		return ErrExited
	case q.closing:
		q.mu.Unlock()
		if done != nil {
			done(nil)
		}
		return nil
	}
	q.closing = true
	q.ops = append(q.ops, stdinOp{close: true, done: done})
	q.notify()
	q.mu.Unlock()
	return nil
}

// isClosed reports whether stdin is closed or closing.
func (q *stdinQueue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closing || q.stopped
}

func (q *stdinQueue) notify() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// run writes queued operations until stop.
func (q *stdinQueue) run() {
	for {
		q.mu.Lock()
		if len(q.ops) == 0 {
			q.mu.Unlock()
			select {
			case <-q.kick:
				continue
			case <-q.quit:
				return
			}
		}
		op := q.ops[0]
		q.ops[0] = stdinOp{}
		q.ops = q.ops[1:]
		q.busy = true
		q.mu.Unlock()

		var err error
		if op.close {
			err = q.f.Close()
		} else {
			_, err = q.f.Write(op.data)
			if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
				err = ErrExited
			}
		}
		q.mu.Lock()
		q.bytes -= len(op.data)
		q.busy = false
		q.mu.Unlock()
		if op.done != nil {
			op.done(err)
		}
	}
}

// stop ends run once the worker has exited: a blocked write is unblocked by
// closing the pipe, and queued operations fail with ErrExited.
func (q *stdinQueue) stop() {
	q.mu.Lock()
	q.stopped = true
	ops := q.ops
	q.ops = nil
	q.mu.Unlock()
	close(q.quit)
	q.f.Close()
	for _, op := range ops {
		if op.done != nil {
			op.done(ErrExited)
		}
	}
}
