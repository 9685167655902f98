package streamdelta

// DeltaAfter returns l as a change to prev: an entry of docs/protocol.md's
// event_delta updates that rebuilds l from prev alone ({"u":step,"o":ops},
// with "r" when the step refers to the partial message). ok is false
// unless a Rebuilder rebuilt l from such an entry coded against prev
// (only a message_update is): l then travels whole.
//
// A consumer that relays a worker's events to readers of its own (the
// control API's watch) sends, to a reader that got prev, this entry
// instead of l's bytes: O(chunk) instead of O(message) per update.
func (l *Line) DeltaAfter(prev *Line) (entry []byte, ok bool) {
	if !l.follows(prev) {
		return nil, false
	}
	if l.step != nil {
		return longEntry(l.step, l.ops), true
	}
	return l.entry, l.entry != nil
}

// longEntry writes step and ops as a self-contained coded entry (what a
// short entry stands for once read against its chain).
func longEntry(step *node, ops []op) []byte {
	out := append([]byte(`{"u":`), step.appendTo(nil)...)
	out = append(out, `,"o":[`...)
	out = appendOps(out, ops)
	return append(out, "]}"...)
}
