package transport

import (
	"testing"
	"testing/synctest"
)

// The inbox keeps order, holds at most max frames (the reader waits for
// room), gives back its memory once empty, and after close hands out what
// waits before it reports the end.
func TestInboxBoundOrderAndMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 100
		q := newInbox(max)
		done := make(chan struct{})
		frames := make([]Frame, 3*max)
		for i := range frames {
			frames[i] = &HeartbeatFrame{}
		}
		put := make(chan int, len(frames))
		go func() {
			for i, f := range frames {
				if !q.put(f, done) {
					return
				}
				put <- i
			}
		}()
		synctest.Wait()
		if n := len(put); n != max {
			t.Fatalf("%d frames went in before anyone took one, want %d", n, max)
		}
		for i := range frames {
			f, ok, _ := q.take(nil)
			if !ok || f != frames[i] {
				t.Fatalf("take %d: %p %v, want %p", i, f, ok, frames[i])
			}
		}
		synctest.Wait()
		q.mu.Lock()
		if len(q.frames) != 0 || cap(q.frames) > 64 {
			t.Errorf("an empty inbox holds a slice of %d (cap %d)", len(q.frames), cap(q.frames))
		}
		q.mu.Unlock()

		q.put(frames[0], done)
		q.close()
		if f, ok, _ := q.take(nil); !ok || f != frames[0] {
			t.Fatalf("after close: %v %v, want the frame that waited", f, ok)
		}
		if _, ok, cancelled := q.take(nil); ok || cancelled {
			t.Fatalf("closed and empty: ok %v cancelled %v", ok, cancelled)
		}

		// A full inbox's put gives up when done closes; a take gives up
		// when cancel closes.
		q = newInbox(1)
		q.put(frames[0], done)
		gaveUp := make(chan bool)
		go func() { gaveUp <- q.put(frames[1], done) }()
		synctest.Wait()
		close(done)
		if <-gaveUp {
			t.Fatal("put into a full inbox succeeded after done closed")
		}
		q.take(nil)
		cancel := make(chan struct{})
		close(cancel)
		if _, ok, cancelled := q.take(cancel); ok || !cancelled {
			t.Fatalf("take on an empty inbox with cancel closed: ok %v cancelled %v", ok, cancelled)
		}
	})
}

// Once it delivers, the inbox runs its deliver goroutine only while
// frames wait (an idle connection has none), one at a time, in order,
// and frames put before deliverTo come first.
func TestInboxDeliversOnlyWhileFramesWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newInbox(8)
		done := make(chan struct{})
		var got []Frame
		starts := 0
		run := func() {
			starts++ // one goroutine at a time: the race detector would see two
			for {
				f, ok := q.next()
				if !ok {
					return
				}
				got = append(got, f)
			}
		}
		frames := make([]Frame, 8)
		for i := range frames {
			frames[i] = &HeartbeatFrame{}
		}
		q.put(frames[0], done)
		q.deliverTo(run)
		synctest.Wait()
		for _, f := range frames[1:4] { // one at a time: a goroutine each
			q.put(f, done)
			synctest.Wait()
			if q.delivering {
				t.Fatal("a deliver goroutine stays with nothing waiting")
			}
		}
		q.mu.Lock() // a burst: one goroutine takes them all
		q.frames = append(q.frames, frames[4:]...)
		q.mu.Unlock()
		q.put(&HeartbeatFrame{}, done)
		synctest.Wait()
		if starts != 5 || q.delivering {
			t.Errorf("%d deliver goroutines (delivering %v), want 5 and none left", starts, q.delivering)
		}
		if len(got) != 9 {
			t.Fatalf("%d frames delivered, want 9", len(got))
		}
		for i, f := range frames {
			if got[i] != f {
				t.Errorf("frame %d delivered out of order", i)
			}
		}
	})
}
