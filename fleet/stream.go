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

// rebuiltEvent is an event rebuilt from event_delta, with the record
// handleFrame would have parsed from it.
type rebuiltEvent struct {
	*transport.EventFrame
	rec pirpc.Record
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
		err := rb.RebuildFrame(d, func(ev *transport.EventFrame, head []byte) {
			if head == nil {
				f.handleFrame(a, c, ev)
				return
			}
			// What the server reads of an update is its step: parse that
			// (a few dozen bytes), not the whole partial message again.
			rec, err := pirpc.ParseValidRecord(head)
			if err != nil {
				f.handleFrame(a, c, ev)
				return
			}
			rec.Raw = ev.Event
			f.handleFrame(a, c, &rebuiltEvent{EventFrame: ev, rec: rec})
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
