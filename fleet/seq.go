package fleet

import "example.com/pifleet/transport"

// eventSeq returns the position a pifleet agent gives an event in its
// worker's stream (docs/protocol.md, event.seq), so that a reconnecting
// server asks for the ones it missed (events_since) and drops the ones it
// already has. A TypeScript agent sends none.
func eventSeq(fr *transport.EventFrame) (uint64, bool) {
	if fr.Seq == nil || *fr.Seq < 0 {
		return 0, false
	}
	return uint64(*fr.Seq), true
}
