package serverstore

import (
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// Every change to the store goes through one queue, committed by one
// goroutine in the order the changes were queued. Changes that wait
// together share one transaction, so one fsync: while a commit is on the
// disk the next changes gather, and a caller that queues a change pays
// for at most the commit in progress and its own, however many others
// write at the same time (bbolt has a single writer: without the queue
// each change waits for every commit before it).
//
// Queue never blocks, so a caller can queue a change while it holds a
// lock that others need, and wait for it (Pending.Wait) after releasing
// the lock. The order of the queue is the order of the calls to Queue:
// two changes of the same record land in the order they were queued,
// whichever goroutine waits for them.
//
// (bbolt's DB.Batch groups changes too, but it blocks its caller, waits
// up to MaxBatchDelay for company, and keeps no order: two batches race
// for the writer, and a change that fails in a batch runs again alone
// after the others.)

// maxGroup bounds the changes committed in one transaction (a failing
// change makes its group commit again one by one).
const maxGroup = 256

// Pending is a change queued by Store.Queue.
type Pending struct {
	s    *Store
	fn   func(*Tx) error
	then func(error)
	done chan struct{}
	err  error
}

// Done is closed once the change was committed, or failed.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait waits until the change was committed (and fsynced) and returns
// nil, or returns why it was not: the error of its function, of the
// commit, or ErrClosed.
func (p *Pending) Wait() error {
	if p.s != nil && p.s.waitCheck != nil {
		p.s.waitCheck()
	}
	<-p.done
	return p.err
}

func (p *Pending) finish(err error) {
	p.err = err
	if p.then != nil {
		p.then(err)
	}
	// A caller may keep the Pending long after (the fleet keeps each
	// instance's last write): what the functions hold, copies of the
	// records written, is let go.
	p.fn, p.then = nil, nil
	close(p.done)
}

// writer is the queue and its committing goroutine.
type writer struct {
	commits atomic.Uint64 // transactions committed (a benchmark's figure)
	mu      sync.Mutex
	queue   []*Pending
	closed  bool
	wake    chan struct{} // one pending signal
	exited  chan struct{}
}

func (s *Store) startWriter() {
	s.w = &writer{wake: make(chan struct{}, 1), exited: make(chan struct{})}
	go s.commitLoop()
}

// Queue queues fn to run in a read-write transaction after every change
// queued before it, and returns at once. fn may run more than once (when
// the group it was committed with failed, it runs again alone), so it
// must only change the store through tx and set what it reports afresh
// on each run. then, when not nil, runs on the committing goroutine once
// the change was committed or failed, with its error: it must not block.
// After Close the change fails with ErrClosed.
func (s *Store) Queue(fn func(*Tx) error, then func(error)) *Pending {
	p := &Pending{s: s, fn: fn, then: then, done: make(chan struct{})}
	w := s.w
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		p.finish(ErrClosed)
		return p
	}
	w.queue = append(w.queue, p)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return p
}

// Hold stops the writer until release is called: it queues a change
// that waits, and returns once the writer runs it, so that what is queued
// next waits behind it. It is for tests of what a slow disk delays;
// release may be called more than once.
func (s *Store) Hold() (release func()) {
	started, hold := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.Queue(func(*Tx) error {
		once.Do(func() { close(started) })
		<-hold
		return nil
	}, nil)
	<-started
	var rel sync.Once
	return func() { rel.Do(func() { close(hold) }) }
}

// commitLoop commits the queue group by group until it is closed and
// empty.
func (s *Store) commitLoop() {
	w := s.w
	defer close(w.exited)
	for {
		w.mu.Lock()
		n := min(len(w.queue), maxGroup)
		group := w.queue[:n:n]
		w.queue = w.queue[n:]
		closed := w.closed
		w.mu.Unlock()
		if n > 0 {
			s.commit(group)
			continue
		}
		if closed {
			return
		}
		<-w.wake
	}
}

// commit runs group in one transaction; if that fails, each change runs
// again in its own, in order, so that only the change at fault fails.
func (s *Store) commit(group []*Pending) {
	s.w.commits.Add(1)
	if len(group) > 1 {
		err := s.db.Update(func(tx *bolt.Tx) error {
			t := &Tx{s: s, tx: tx}
			for _, p := range group {
				if err := p.fn(t); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			for _, p := range group {
				p.finish(nil)
			}
			return
		}
	}
	for i, p := range group {
		if i > 0 || len(group) > 1 {
			s.w.commits.Add(1)
		}
		p.finish(s.db.Update(func(tx *bolt.Tx) error { return p.fn(&Tx{s: s, tx: tx}) }))
	}
}

// stopWriter commits what is queued and stops the committing goroutine;
// later changes fail with ErrClosed.
func (s *Store) stopWriter() {
	w := s.w
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.exited
}
