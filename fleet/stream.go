package fleet

import (
	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
)

// serverCapabilities is what the server's hello announces: pifleet's
// frames, and that it rebuilds streamed output sent as event_delta,
// references to finished messages included.
var serverCapabilities = []string{transport.CapabilityPifleet, transport.CapabilityEventDelta, transport.CapabilityEventRefs}

// rebuiltEvent is an update rebuilt from event_delta: its line, written
// out only when a consumer reads it (Event.Raw), and the record
// handleFrame would have parsed from it. The EventFrame has no Event. The
// frame and its seq are parts of it (EventFrame points at frame).
type rebuiltEvent struct {
	*transport.EventFrame
	rec  pirpc.Record
	line *streamdelta.Line

	frame transport.EventFrame
	seq   float64
}

// lastStep is the last update of a worker whose head was parsed: its line
// and record.
type lastStep struct {
	line *streamdelta.Line
	rec  pirpc.Record
}

// frameHandler returns the handler of agent a's connection c. An
// event_delta frame is rebuilt into the events it codes, each handled as
// the event frame pi's line would have come in, so nothing past this
// point knows the difference. The rebuilder belongs to the connection: a
// new connection starts from whole updates.
func (f *Fleet) frameHandler(a *agentState, c *transport.Conn) func(transport.Frame) {
	rb := streamdelta.NewRebuilder(transport.MaxFrameBytes)
	steps := map[string]lastStep{} // per worker mid-message
	return func(fr transport.Frame) {
		d, ok := fr.(*transport.EventDeltaFrame)
		if !ok {
			if e, ok := fr.(*transport.WorkerExitedFrame); ok {
				// Nothing of the worker's stream comes after its exit
				// notice (the agent sends what waits first): let go of
				// its partial message and the finished ones held for it,
				// which an answer cut off before its agent_end would
				// otherwise keep until the connection closes.
				rb.Forget(e.InstanceID)
				delete(steps, e.InstanceID)
			}
			f.handleFrame(a, c, fr)
			return
		}
		err := rb.RebuildFrameLines(d, func(seq uint64, line *streamdelta.Line, head []byte) {
			ev := &rebuiltEvent{line: line, seq: float64(seq)}
			ev.frame = transport.EventFrame{InstanceID: d.InstanceID, Seq: &ev.seq}
			ev.EventFrame = &ev.frame
			// What the server reads of an update is its step: parse that
			// (a few dozen bytes), not the whole partial message again,
			// nor write the update out (O(n²) bytes for an answer of n
			// characters) unless a consumer reads it. A step that is the
			// last one with another delta is that one's record with the
			// delta decoded.
			if head != nil && (ev.stepAfter(steps[d.InstanceID], head) || ev.parseHead(head)) {
				steps[d.InstanceID] = lastStep{line: line, rec: ev.rec}
				f.handleFrame(a, c, ev)
				return
			}
			delete(steps, d.InstanceID)
			ev.Event = line.Bytes()
			f.handleFrame(a, c, ev.EventFrame)
		})
		if err != nil {
			// Not something a pifleet agent writes: the events after it
			// cannot be trusted. The agent reconnects, and the server asks
			// for what it missed, whole (events_since).
			f.log.Error().Err(err).Str("agent", a.name).Msg("agent sent streamed output that cannot be rebuilt; closing the connection")
			_ = c.Close()
		}
	}
}

// parseHead sets e's record to head's.
func (e *rebuiltEvent) parseHead(head []byte) bool {
	rec, err := pirpc.ParseValidRecord(head)
	e.rec = rec
	return err == nil
}

// stepAfter sets e's record to last's with the delta of e's step, when
// that is the only change (streamdelta.Line.StepAfter); it reports
// whether it did.
func (e *rebuiltEvent) stepAfter(last lastStep, head []byte) bool {
	delta, ok := e.line.StepAfter(last.line)
	if !ok {
		return false
	}
	e.rec, ok = last.rec.WithDelta(head, delta)
	return ok
}
