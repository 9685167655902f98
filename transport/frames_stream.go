package transport

import "encoding/json"

// CapabilityEventDelta, in a hello's capabilities, says the sender speaks
// event_delta: an agent that announces it sends a worker's streamed
// message_update events as event_delta frames to a server that announces
// it too (docs/protocol.md, "Streamed output as deltas"). A TypeScript
// server announces nothing and gets every event whole.
const CapabilityEventDelta = "event-delta"

// CapabilityEventRefs, in a server's hello beside CapabilityEventDelta,
// says it also resolves references to finished messages: an agent then
// sends turn_end and agent_end in event_delta frames, referring to the
// messages the connection carried before instead of sending them again
// (docs/protocol.md). A server with only CapabilityEventDelta gets those
// events whole.
const CapabilityEventRefs = "event-refs"

// CapabilityEventCoalesce, in a server's hello beside CapabilityEventDelta,
// says it takes a run of streamed updates joined into one: an agent then
// sends the updates of a text that wait in one event_delta frame together
// as one update, the last, whose delta is theirs joined and which takes
// their seqs (docs/protocol.md). A server without it gets every update.
const CapabilityEventCoalesce = "event-coalesce"

// TypeEventDelta is the wire name of EventDeltaFrame.
const TypeEventDelta = "event_delta"

// EventDeltaFrame (A→S) carries consecutive message_update events (and the
// message_end that closes them) of one worker, each one coded against the
// one before it on the same connection, so that streamed text costs its own
// size on the wire instead of the whole partial message per chunk. The
// server rebuilds each event byte for byte (fleet/internal/streamdelta) and
// handles it as the event frame it stands for.
type EventDeltaFrame struct {
	Header
	InstanceID string
	// Seq is the seq of the first update; the others follow one by one.
	Seq float64
	// Base is the seq of the event the first update is coded against
	// (absent when the first update is whole).
	Base *float64
	// Updates is the array of coded events (see docs/protocol.md).
	Updates json.RawMessage
}

// FrameType returns "event_delta".
func (*EventDeltaFrame) FrameType() string { return TypeEventDelta }

// schema lists event_delta's fields.
func (f *EventDeltaFrame) schema(s *schema) {
	s.String("instanceId", &f.InstanceID, required)
	s.Number("seq", &f.Seq)
	s.OptNumber("base", &f.Base)
	s.RawOf("updates", &f.Updates, required, kindArray)
}

func init() { addKind(registry, kind[EventDeltaFrame]()) }
