package worker

import (
	"bytes"
	"time"

	"example.com/pifleet/internal/shim"
)

// A worker that streams an answer writes a message_update per chunk, and
// a reader that keeps up sees each one as a burst of its own: acking at
// the end of every burst (or whenever the delivery queue ran empty) cost
// a write to the shim, and a wakeup of it, per update. Updates are never
// the last line of anything (message_end follows), so their acks wait for
// the next line that is, within bounds: what the shim keeps for the agent
// meanwhile is at most maxHeldAckLines lines and a quarter of its window
// (so the window never fills because of a held ack), for at most
// defaultAckHoldFor (a stream that pauses mid-answer still gets its acks
// out), and at most that much is delivered again after an agent restart.
// Detach and the end of the stream send a held ack at once.
const (
	maxHeldAckLines   = 256
	maxHeldAckBytes   = 1 << 20
	defaultAckHoldFor = 50 * time.Millisecond
)

// heldAcks counts the delivered lines whose ack waits.
type heldAcks struct{ lines, bytes int }

var updatePrefix = []byte(`{"type":"message_update"`)

// wait reports whether the ack owed after ev may wait for a later line,
// counting ev as waiting if so.
func (h *heldAcks) wait(ev shim.Event, limit int) bool {
	if ev.Kind == shim.EventLine && bytes.HasPrefix(ev.Data, updatePrefix) &&
		h.lines < maxHeldAckLines && h.bytes+len(ev.Data) <= limit {
		h.lines++
		h.bytes += len(ev.Data)
		return true
	}
	*h = heldAcks{}
	return false
}
