// Package streamdelta codes a worker's streamed message_update events as
// small updates and rebuilds them, byte for byte, on the other side.
//
// pi's message_update carries the whole partial assistant message twice
// (assistantMessageEvent.partial and message), so forwarding each event
// as it is costs the square of the answer's length on the wire. Between a
// pifleet agent and a pifleet server that both announce
// transport.CapabilityEventDelta, the agent sends instead, per event, what
// changed since the event before it on the same connection: the step (the
// assistantMessageEvent without its partial) and a few ops on the partial
// (append this to that string, set, add). A run of updates that repeat the
// last one's shape with a new delta is just the delta. The server keeps
// the partial message of each worker that is mid-message and writes every
// event out again exactly as pi wrote it, so every consumer sees what it
// would have seen.
//
// pi also repeats finished messages: turn_end carries the turn's
// messages again and agent_end every message of the run. To a server that
// announces transport.CapabilityEventRefs those lines go as references to
// the message_end events the connection carried before (held.go).
//
// The sending side is an Encoder per worker (it follows the worker's
// stream), a Chain per connection and worker (what that connection can
// decode) and a Batch that gathers consecutive updates into one
// event_delta frame. The receiving side is a Rebuilder per connection. A
// connection's first update of a message, and any update after a line the
// codec does not recognise, travels whole, so a new connection (a
// reconnect mid-answer) never needs what an old one carried. The format is
// in docs/protocol.md.
package streamdelta
