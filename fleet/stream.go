package fleet

import (
	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/transport"
)

// serverCapabilities is what the server's hello announces: pifleet's
// frames, and that it rebuilds streamed output sent as event_delta.
var serverCapabilities = []string{transport.CapabilityPifleet, transport.CapabilityEventDelta}

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
		err := rb.RebuildFrame(d, func(ev *transport.EventFrame) { f.handleFrame(a, c, ev) })
		if err != nil {
			// Not something a pifleet agent writes: the events after it
			// cannot be trusted. The agent reconnects, and the server asks
			// for what it missed, whole (events_since).
			f.log.Error().Err(err).Str("agent", a.name).Msg("agent sent streamed output that cannot be rebuilt; closing the connection")
			_ = c.Close()
		}
	}
}
