package controlapi

import (
	"encoding/json"
	"errors"
	"fmt"

	"example.com/pifleet/fleet/internal/streamdelta"
)

// A worker streaming an answer of n characters in small chunks emits
// about n/16 message_update events, each with the whole partial message
// (twice): sent whole, a watcher reads O(n²) bytes. A watcher that asks
// for deltas (GET /v1/watch?deltas=1) gets instead, for an update that is
// a change to the instance's event it got just before, only that change:
// the change's "delta" member, one entry of the agent's own event_delta
// coding (docs/protocol.md), in place of "data". The first update of a
// message, any update after a gap (a dropped change, a watcher that
// joined mid-message) and every other event travel whole, as before. The
// Client asks for deltas and rebuilds each event byte for byte, so its
// callers see what a watcher that did not ask would have seen.

// WatchDeltasParam is the query parameter of GET /v1/watch that asks for
// streamed updates as deltas ("1").
const WatchDeltasParam = "deltas"

// ErrWatchDelta is wrapped by the error of a watch stream whose delta
// cannot be rebuilt (not something a pifleet server sends).
var ErrWatchDelta = errors.New("controlapi: watch: a streamed update that cannot be rebuilt")

// wireChange is a Change as the watch sends it: with Delta in place of
// Data for a streamed update sent as a change.
type wireChange struct {
	Change
	Delta json.RawMessage `json:"delta,omitempty"`
}

// deltaCoder decides, for one watch that asked for deltas, which event
// changes go as deltas: it remembers the last event of each instance the
// watch was sent.
type deltaCoder struct {
	last map[string]WorkerEvent
}

// code returns what the watch sends for c.
func (d *deltaCoder) code(c Change) wireChange {
	w := wireChange{Change: c}
	if c.Kind != ChangeEvent {
		return w
	}
	if d != nil {
		prev := d.last[c.InstanceID]
		if c.Worker != nil && (c.Event == "message_start" || c.Event == "message_update") {
			d.last[c.InstanceID] = c.Worker
		} else {
			// Nothing is coded against any other event: hold none (an
			// agent_end can be a whole run's messages).
			delete(d.last, c.InstanceID)
		}
		if prev != nil && c.Worker != nil {
			if entry, ok := c.Worker.DeltaAfter(prev); ok {
				w.Delta = entry
				return w
			}
		}
	}
	if w.Data == nil && c.Worker != nil {
		w.Data = c.Worker.Raw()
	}
	return w
}

// deltaRebuilder turns the deltas of one watch stream back into whole
// events (client side). Each instance's event changes are numbered in
// order; a delta must be coded against the instance's change just before
// it, which must have been a message's start or update.
type deltaRebuilder struct {
	rb   *streamdelta.Rebuilder
	seqs map[string]uint64
	// omit: the reader wants no event's Data (Stream.OmitEventData).
	omit bool
}

func newDeltaRebuilder() *deltaRebuilder {
	return &deltaRebuilder{rb: streamdelta.NewRebuilder(4 * MaxBodyBytes), seqs: map[string]uint64{}}
}

// rebuild returns w's Change with Data rebuilt from its delta, and takes
// note of a whole update for the deltas after it.
func (r *deltaRebuilder) rebuild(w wireChange) (Change, error) {
	c := w.Change
	if c.Kind != ChangeEvent {
		if w.Delta != nil {
			return Change{}, fmt.Errorf("%w: change %d (%s) has a delta", ErrWatchDelta, c.Seq, c.Kind)
		}
		return c, nil
	}
	seq := r.seqs[c.InstanceID] + 1
	r.seqs[c.InstanceID] = seq
	switch {
	case w.Delta != nil:
		if c.Data != nil {
			return Change{}, fmt.Errorf("%w: change %d has both data and a delta", ErrWatchDelta, c.Seq)
		}
		base := seq - 1
		updates := make([]byte, 0, len(w.Delta)+2)
		updates = append(append(append(updates, '['), w.Delta...), ']')
		err := r.rb.RebuildLines(c.InstanceID, seq, &base, updates, func(_ uint64, line *streamdelta.Line, _ []byte) {
			if !r.omit {
				c.Data = line.Bytes() // O(message): what omit saves
			}
		})
		if err != nil {
			return Change{}, fmt.Errorf("%w: change %d: %w", ErrWatchDelta, c.Seq, err)
		}
	case c.Event == "message_start" || c.Event == "message_update":
		// The base of the deltas that may follow. An event the rebuilder
		// does not take as a base is passed on as it is: a delta after it
		// is then refused.
		whole := make([]byte, 0, len(c.Data)+6)
		whole = append(append(append(whole, `[{"e":`...), c.Data...), "}]"...)
		_ = r.rb.Rebuild(c.InstanceID, seq, nil, whole, func(uint64, []byte, []byte) {})
	default:
		r.rb.Forget(c.InstanceID) // no delta comes after it: drop the partial message
	}
	if r.omit {
		c.Data = nil
	}
	return c, nil
}
