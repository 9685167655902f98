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
// handleFrame would have parsed from it. The EventFrame has no Event.
type rebuiltEvent struct {
	*transport.EventFrame
	rec  pirpc.Record
	line *streamdelta.Line
}

// frameHandler returns the handler of agent a's connection c. An
// event_delta frame is rebuilt into the events it codes, each handled as
// the event frame pi's line would have come in, so nothing past this
// point knows the difference. The rebuilder belongs to the connection: a
// new connection starts from whole updates.
func (f *Fleet) frameHandler(a *agentState, c *transport.Conn) func(transport.Frame) {
	rb := streamdelta.NewRebuilder(transport.MaxFrameBytes)
	return func(fr transport.Frame) {
		d, ok := fr.(*transport.EventDeltaFrame)
		if !ok {
			f.handleFrame(a, c, fr)
			return
		}
		err := rb.RebuildFrameLines(d, func(seq uint64, line *streamdelta.Line, head []byte) {
			s := float64(seq)
			ev := &transport.EventFrame{InstanceID: d.InstanceID, Seq: &s}
			// What the server reads of an update is its step: parse that
			// (a few dozen bytes), not the whole partial message again,
			// nor write the update out (O(n²) bytes for an answer of n
			// characters) unless a consumer reads it.
			var rec pirpc.Record
			var err error
			if head != nil {
				rec, err = pirpc.ParseValidRecord(head)
			}
			if head == nil || err != nil {
				ev.Event = line.Bytes()
				f.handleFrame(a, c, ev)
				return
			}
			f.handleFrame(a, c, &rebuiltEvent{EventFrame: ev, rec: rec, line: line})
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
