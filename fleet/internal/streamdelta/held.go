package streamdelta

import (
	"bytes"
	"slices"
	"strconv"
)

// pi repeats finished messages: turn_end carries the turn's assistant
// message and tool results, agent_end every message of the run, each
// byte for byte as its message_end wrote it. A connection that carried
// those message_end events holds the messages, and the later event refers
// to them by the seq of their message_end instead of sending them again.
//
// What a connection holds of one worker, both ends keep by the same rule,
// so that the agent refers only to what the server has: every message_end
// the connection carries (whole or coded) adds its message; past the
// bounds below the oldest go first; an agent_end empties it (the run is
// over, and an idle worker costs the server nothing). A new connection
// holds nothing.
const (
	heldBytes = 4 << 20
	heldCount = 256
)

// held is the finished messages one connection holds of one worker,
// oldest first. The sending side keeps only their sizes (msgs is nil).
type held struct {
	seqs  []uint64
	sizes []int
	msgs  [][]byte
	total int
}

// add records the message of the message_end of seq, size bytes long
// (msg nil on the sending side).
func (h *held) add(seq uint64, size int, msg []byte, keep bool) {
	if size > heldBytes {
		return
	}
	drop := 0
	for drop < len(h.seqs) && (h.total+size > heldBytes || len(h.seqs)-drop >= heldCount) {
		h.total -= h.sizes[drop]
		drop++
	}
	if drop > 0 {
		h.seqs = slices.Delete(h.seqs, 0, drop)
		h.sizes = slices.Delete(h.sizes, 0, drop)
		if keep {
			h.msgs = slices.Delete(h.msgs, 0, drop)
		}
	}
	h.seqs = append(h.seqs, seq)
	h.sizes = append(h.sizes, size)
	if keep {
		h.msgs = append(h.msgs, msg)
	}
	h.total += size
}

// at returns the position of the message of seq, or -1.
func (h *held) at(seq uint64) int {
	for i := len(h.seqs) - 1; i >= 0; i-- {
		if h.seqs[i] == seq {
			return i
		}
	}
	return -1
}

func (h *held) empty() { *h = held{} }

// Lines that repeat finished messages, and the line that ends a run.
var (
	prefixTurnEnd  = []byte(`{"type":"turn_end",`)
	prefixAgentEnd = []byte(`{"type":"agent_end",`)
)

// endsRun reports whether line is an agent_end (which empties what a
// connection holds).
func endsRun(line []byte) bool { return bytes.HasPrefix(line, prefixAgentEnd) }

// repeats reports whether line is of a kind that repeats finished
// messages.
func repeats(line []byte) bool { return bytes.HasPrefix(line, prefixTurnEnd) || endsRun(line) }

// found is a finished message inside a line: the value at path is the
// message of the message_end of seq.
type found struct {
	path []int
	seq  uint64
}

// findHeld looks through n (a line, a few levels deep) for objects that
// are, byte for byte, messages h holds.
func findHeld(h *held, n *node, path []int, out []found) []found {
	if n.kind == '{' && len(path) > 0 {
		for i := len(h.msgs) - 1; i >= 0; i-- {
			if len(h.msgs[i]) == len(n.raw) && bytes.Equal(h.msgs[i], n.raw) {
				return append(out, found{path: slices.Clone(path), seq: h.seqs[i]})
			}
		}
	}
	if n.kind == 0 || len(path) >= 3 {
		return out
	}
	for i, k := range n.kids {
		out = findHeld(h, k, append(path, i), out)
	}
	return out
}

// refEntry writes {"m":template,"r":[[path,seq]…]}: the line with each
// referred message written null, and where to put which message back.
func refEntry(line *node, refs []found) []byte {
	out := appendNulled([]byte(`{"m":`), line, nil, refs)
	out = append(out, `,"r":[`...)
	for i, r := range refs {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendPath(append(out, '['), r.path)
		out = strconv.AppendUint(append(out, ','), r.seq, 10)
		out = append(out, ']')
	}
	return append(out, "]}"...)
}

// appendNulled writes n (at path) with the values at the refs' paths
// written null. Members off every path go as the bytes they were read
// from.
func appendNulled(dst []byte, n *node, path []int, refs []found) []byte {
	under := false
	for _, r := range refs {
		if len(r.path) >= len(path) && slices.Equal(r.path[:len(path)], path) {
			if len(r.path) == len(path) {
				return append(dst, "null"...)
			}
			under = true
		}
	}
	if !under || n.kind == 0 {
		if n.raw != nil && !n.open {
			return append(dst, n.raw...)
		}
		return n.appendTo(dst)
	}
	open, closing := byte('['), byte(']')
	if n.kind == '{' {
		open, closing = '{', '}'
	}
	dst = append(dst, open)
	for i, k := range n.kids {
		if i > 0 {
			dst = append(dst, ',')
		}
		if n.kind == '{' {
			dst = append(append(dst, n.keys[i]...), ':')
		}
		dst = appendNulled(dst, k, append(path, i), refs)
	}
	return append(dst, closing)
}
