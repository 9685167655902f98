//go:build unix

package shim

import (
	"net"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/rs/zerolog"
)

// sessionRig runs one session's writeLoop against a backlog, with a reader
// on the other end of a net.Pipe recording what arrives.
type sessionRig struct {
	s      *server
	ss     *session
	client net.Conn

	mu   sync.Mutex
	got  []shimFrame
	done chan struct{}
}

func newSessionRig(t *testing.T, cfg Config, bufferBytes int) *sessionRig {
	cfg = cfg.withDefaults()
	s := &server{cfg: cfg, log: zerolog.Nop(), backlog: newBacklog(bufferBytes)}
	serverEnd, client := net.Pipe()
	r := &sessionRig{
		s:      s,
		ss:     &session{s: s, conn: serverEnd, out: newFrameWriter(serverEnd), wake: make(chan struct{}, 1), done: make(chan struct{}), cursor: 1},
		client: client,
		done:   make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		for {
			typ, body, err := readFrame(client, maxLineFrame(cfg.MaxLine))
			if err != nil {
				return
			}
			f, err := decodeShimFrame(typ, body)
			if err != nil {
				t.Errorf("decode: %v", err)
				return
			}
			r.mu.Lock()
			r.got = append(r.got, f)
			r.mu.Unlock()
		}
	}()
	return r
}

// appendLines appends n lines at once, as one read of the worker's stdout
// could: the writer sees all or none of them.
func (r *sessionRig) appendLines(n, size int) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for range n {
		r.s.backlog.append(record{kind: recordLine, data: make([]byte, size)})
	}
	r.ss.notify()
}

func (r *sessionRig) received() []shimFrame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]shimFrame(nil), r.got...)
}

func (r *sessionRig) ack(seq uint64) {
	r.s.mu.Lock()
	r.s.ackLocked(r.ss, seq)
	r.s.mu.Unlock()
}

func (r *sessionRig) stop() {
	r.ss.close()
	r.client.Close()
	<-r.done
}

func TestSessionWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		perLine := 100 + recordOverhead
		r := newSessionRig(t, Config{Window: 6*perLine + 10}, 1<<20)
		r.s.attached = r.ss
		r.appendLines(20, 100)
		go r.ss.writeLoop()
		defer r.stop()

		synctest.Wait() // the writer is parked at the window
		if got := len(r.received()); got != 6 {
			t.Fatalf("sent %d lines without an ack, window allows 6", got)
		}
		r.ack(4)
		synctest.Wait()
		if got := len(r.received()); got != 10 {
			t.Fatalf("after ack 4: sent %d lines, want 10", got)
		}
		r.ack(10)
		synctest.Wait()
		if got := len(r.received()); got != 16 {
			t.Fatalf("after ack 10: sent %d lines, want 16", got)
		}
		r.ack(16)
		// A line larger than the whole window waits for the window to be
		// empty, then goes alone.
		r.appendLines(1, 10*perLine)
		synctest.Wait()
		if got := len(r.received()); got != 20 {
			t.Fatalf("after ack 16: sent %d lines, want 20", got)
		}
		r.ack(20)
		synctest.Wait()
		got := r.received()
		if len(got) != 21 || got[20].seq != 21 || len(got[20].data) != 10*perLine {
			t.Fatalf("after ack 20: %d frames, last seq %d", len(got), got[len(got)-1].seq)
		}
		for i, f := range got {
			if f.typ != frameLine || f.seq != uint64(i+1) {
				t.Fatalf("frame %d: %s seq %d", i, f.typ, f.seq)
			}
		}
	})
}

func TestSessionReportsGapThenResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		perLine := 10 + recordOverhead
		r := newSessionRig(t, Config{}, 5*perLine)
		r.s.attached = r.ss
		r.appendLines(12, 10) // 1..7 are pushed out
		go r.ss.writeLoop()
		defer r.stop()
		synctest.Wait()
		got := r.received()
		if len(got) != 6 || got[0].typ != frameGap || got[0].gap != (GapError{From: 1, To: 8}) {
			t.Fatalf("got %d frames, first %s %v; want a gap 1..8 then 5 lines", len(got), got[0].typ, got[0].gap)
		}
		for i, f := range got[1:] {
			if f.typ != frameLine || f.seq != uint64(8+i) {
				t.Fatalf("frame %d: %s seq %d", i+1, f.typ, f.seq)
			}
		}
		// Unacknowledged lines keep being dropped while the agent is slow;
		// the gap is reported where the session's cursor is.
		r.appendLines(10, 10) // 13..22; 13..17 dropped
		synctest.Wait()
		got = r.received()[6:]
		if len(got) != 6 || got[0].typ != frameGap || got[0].gap != (GapError{From: 13, To: 18}) {
			t.Fatalf("second round: %d frames, first %s %v; want a gap 13..18 then 5 lines", len(got), got[0].typ, got[0].gap)
		}
	})
}
