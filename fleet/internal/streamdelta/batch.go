package streamdelta

import (
	"encoding/json"

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
type Batch struct {
	instanceID string
	first      uint64
	base       *float64
	n          int
	buf        []byte
}

// NewBatch returns an empty batch for the worker instanceID.
func NewBatch(instanceID string) *Batch { return &Batch{instanceID: instanceID} }

// Len is the number of entries held.
func (b *Batch) Len() int { return b.n }

// Size is the number of bytes the entries take.
func (b *Batch) Size() int { return len(b.buf) }

// Fits reports whether the event of seq can join the batch (it must follow
// the last one).
func (b *Batch) Fits(seq uint64) bool { return b.n == 0 || seq == b.first+uint64(b.n) }

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
	} else {
		b.buf = append(b.buf, ',')
	}
	b.buf = append(b.buf, entry...)
	b.n++
}

// Frame returns the batch's frame and empties the batch (nil when empty).
func (b *Batch) Frame() *transport.EventDeltaFrame {
	if b.n == 0 {
		return nil
	}
	updates := make(json.RawMessage, 0, len(b.buf)+1)
	updates = append(append(updates, b.buf...), ']')
	f := &transport.EventDeltaFrame{InstanceID: b.instanceID, Seq: float64(b.first), Base: b.base, Updates: updates}
	b.n, b.base, b.buf = 0, nil, b.buf[:0]
	if cap(b.buf) > 64<<10 {
		b.buf = nil // a whole message went by: do not keep its room
	}
	return f
}
