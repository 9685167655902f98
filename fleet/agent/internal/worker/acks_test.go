//go:build unix

package worker

import (
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/pifleet/internal/pitest"
)

// ackLog records the acks a Worker sends (Spec.onAck).
type ackLog struct {
	mu   sync.Mutex
	seqs []uint64
	kick chan struct{}
}

func watchAcks(spec *Spec) *ackLog {
	l := &ackLog{kick: make(chan struct{}, 1)}
	spec.onAck = func(seq uint64) {
		l.mu.Lock()
		l.seqs = append(l.seqs, seq)
		l.mu.Unlock()
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return l
}

func (l *ackLog) snapshot() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.seqs...)
}

// waitThrough waits until an ack covers seq (acks are cumulative). It
// fails after waitLimit: an ack that never goes out would hang the test.
func (l *ackLog) waitThrough(t *testing.T, seq uint64, what string) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		if s := l.snapshot(); len(s) > 0 && s[len(s)-1] >= seq {
			return
		}
		select {
		case <-l.kick:
		case <-deadline:
			t.Fatalf("%s (seq %d) not acknowledged within %v; acks: %v", what, seq, waitLimit, l.snapshot())
		}
	}
}

// An answer streamed a character at a time is 1,000 message_updates read
// by a reader that keeps up: their acks wait for the line after them, so
// the answer costs its shim a handful of acks (one per maxHeldAckLines
// updates, and one for each line around them), not one per update. The
// line that ends the run (agent_end) is acknowledged without waiting for
// the hold timer (an hour here).
func TestAStreamedAnswerCostsFewAcks(t *testing.T) {
	spec := piSpec(t, pitest.Scripted, pitest.Options{})
	spec.Env = append(spec.Env, "PIFLEET_FAUX_CHUNK=1")
	spec.ackHoldFor = time.Hour
	acks := watchAcks(&spec)
	w := start(t, spec)
	s := newStream(t, w)
	before := len(acks.snapshot())
	prompt(t, w, "p1", "say: "+strings.Repeat("x", 1000))
	evs := s.until(settled)
	updates := count(evs, isKind("message_update"))
	if updates < 1000 { // and text_start, text_end
		t.Fatalf("%d message_updates, want at least 1000", updates)
	}
	var end uint64
	for _, ev := range evs {
		if ev.Kind == "agent_end" {
			end = ev.Seq
		}
	}
	if end == 0 {
		t.Fatalf("no agent_end in %s", kinds(evs))
	}
	acks.waitThrough(t, end, "agent_end")
	sent := len(acks.snapshot()) - before
	// 1,002 updates hold at most 4 acks' worth (256 each); the other
	// lines of the run (responses, agent/turn/message starts and ends,
	// the settle barrier's get_state) are about a dozen.
	if limit := 1000/maxHeldAckLines + 1 + 20; sent > limit {
		t.Errorf("%d acks for a run of %d lines (%d updates): more than %d", sent, len(evs), updates, limit)
	}
	t.Logf("%d acks for %d events", sent, len(evs))
	stopAndDrain(t, w, s)
}

// A stream that pauses after a message_update (a model slow to go on)
// still gets that update acknowledged: the held ack goes out when the
// hold timer fires, and the shim has applied it.
func TestAHeldAckGoesOutWhenTheStreamPauses(t *testing.T) {
	spec := helperSpec(t, "pausing")
	spec.ackHoldFor = time.Millisecond
	acks := watchAcks(&spec)
	w := start(t, spec)
	s := newStream(t, w)
	prompt(t, w, "p1", "hi")
	update := s.until(isKind("message_update"))
	seq := update[len(update)-1].Seq
	acks.waitThrough(t, seq, "the update before the pause")
	w.mu.Lock()
	c := w.gen.c
	w.mu.Unlock()
	st, err := c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.AckedThrough < seq {
		t.Errorf("the shim has acknowledged through %d, want %d", st.AckedThrough, seq)
	}
	send(t, w, map[string]any{"type": "abort"})
	s.until(settled)
	stopAndDrain(t, w, s)
}
