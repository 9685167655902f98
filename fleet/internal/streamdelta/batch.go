package streamdelta

import (
	"encoding/json"
	"strconv"

	"example.com/pifleet/internal/jsonscan"
	"example.com/pifleet/transport"
)

// Carries reports whether an event of this kind travels in event_delta
// frames to a server that reads them: a message's start, its updates and
// its end, and (to a server that resolves references) the turn_end and
// agent_end that repeat finished messages. Every other event goes whole,
// in an event frame.
func Carries(kind string, refs bool) bool {
	switch kind {
	case "message_start", "message_update", "message_end":
		return true
	case "turn_end", "agent_end":
		return refs
	}
	return false
}

// Waits reports whether an event of this kind may wait in a batch for the
// ones after it (a message's start and its updates); any other that the
// codec carries ends the batch.
func Waits(kind string) bool { return kind == "message_start" || kind == "message_update" }

// Batch gathers the consecutive entries one connection gets of one
// worker's stream into one event_delta frame, so that the frame's own
// bytes are shared by many small updates.
//
// A coalescing batch (for a server that announced
// transport.CapabilityEventCoalesce) also joins a run of updates that
// only append their delta, the chunks of a text, into one entry
// {"c":n,"d":delta}: the server then gets one update for the run, the
// last one with the run's deltas as its delta, instead of n.
type Batch struct {
	instanceID string
	coalesce   bool
	first      uint64
	next       uint64 // the seq the next entry must have
	base       *float64
	n          int    // updates held
	buf        []byte // the entries written, after '['
	// run is how many delta-only updates end the batch, not written yet
	// (coalescing only); joined is their deltas' string bodies.
	run    int
	joined []byte
}

// NewBatch returns an empty batch for the worker instanceID.
func NewBatch(instanceID string) *Batch { return &Batch{instanceID: instanceID} }

// NewCoalescingBatch returns an empty batch for the worker instanceID that
// joins runs of delta-only updates.
func NewCoalescingBatch(instanceID string) *Batch {
	return &Batch{instanceID: instanceID, coalesce: true}
}

// Len is the number of updates held (a joined run counts each).
func (b *Batch) Len() int { return b.n }

// Size is the number of bytes the entries take.
func (b *Batch) Size() int {
	if b.run == 0 {
		return len(b.buf)
	}
	return len(b.buf) + len(b.joined) + len(`,{"c":1024,"d":""}`)
}

// Fits reports whether the event of seq can join the batch (it must follow
// the last one).
func (b *Batch) Fits(seq uint64) bool { return b.n == 0 || seq == b.next }

// Add appends c as ch picks it (see Chain.Pick). The caller checked Fits.
func (b *Batch) Add(ch *Chain, c *Coded) {
	entry, coded := ch.Pick(c)
	if b.n == 0 {
		b.first, b.base = c.Seq, nil
		if coded {
			base := float64(c.base)
			b.base = &base
		}
		b.buf = append(b.buf[:0], '[')
	}
	b.n++
	b.next = c.Seq + 1
	if b.coalesce && coded {
		if delta, ok := deltaAlone(entry); ok {
			b.run++
			b.joined = append(b.joined, delta[1:len(delta)-1]...) // the string's body
			return
		}
	}
	b.endRun()
	if len(b.buf) > 1 {
		b.buf = append(b.buf, ',')
	}
	b.buf = append(b.buf, entry...)
}

// endRun writes the run of delta-only updates that ends the batch: one
// alone as the short entry it was, more as one joined entry.
func (b *Batch) endRun() {
	if b.run == 0 {
		return
	}
	if len(b.buf) > 1 {
		b.buf = append(b.buf, ',')
	}
	if b.run == 1 {
		b.buf = append(append(append(b.buf, '[', '"'), b.joined...), '"', ']')
	} else {
		b.buf = strconv.AppendInt(append(b.buf, `{"c":`...), int64(b.run), 10)
		b.buf = append(append(append(b.buf, `,"d":"`...), b.joined...), '"', '}')
	}
	b.run, b.joined = 0, b.joined[:0]
}

// deltaAlone returns the delta, quotes included, of a short entry that
// is its delta alone, ["…"]: the form of an update whose ops only append
// the delta (a short entry carries the values of any other op), which
// the encoder writes and the Rebuilder reads without a parse.
func deltaAlone(entry []byte) ([]byte, bool) {
	if len(entry) < 4 || entry[0] != '[' || entry[1] != '"' {
		return nil, false
	}
	end, _ := jsonscan.SkipString(entry, 1)
	if end != len(entry)-1 || entry[end] != ']' {
		return nil, false
	}
	return entry[1:end], true
}

// Frame returns the batch's frame and empties the batch (nil when empty).
func (b *Batch) Frame() *transport.EventDeltaFrame {
	if b.n == 0 {
		return nil
	}
	b.endRun()
	updates := make(json.RawMessage, 0, len(b.buf)+1)
	updates = append(append(updates, b.buf...), ']')
	f := &transport.EventDeltaFrame{InstanceID: b.instanceID, Seq: float64(b.first), Base: b.base, Updates: updates}
	b.n, b.base, b.buf = 0, nil, b.buf[:0]
	if cap(b.buf) > 64<<10 {
		b.buf = nil // a whole message went by: do not keep its room
	}
	if cap(b.joined) > 64<<10 {
		b.joined = nil
	}
	return f
}
