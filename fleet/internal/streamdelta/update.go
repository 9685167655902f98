package streamdelta

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// The shapes of pi's lines the codec relies on (any other line travels
// whole): a message_update, {"type":"message_update",
// "assistantMessageEvent":{…,"partial":P},"message":P} with the same bytes
// P twice, and a message line, {"type":"message_start"|"message_end",
// "message":P}.
var (
	keyPartial = []byte(`"partial"`)
	keyDelta   = []byte(`"delta"`)
	// keyDeltaMember is keyDelta as a member starts.
	keyDeltaMember = []byte(`"delta":`)
	typeStart      = []byte(`"message_start"`)
	typeEnd        = []byte(`"message_end"`)

	linePrefix    = []byte(`{"type":"message_update","assistantMessageEvent":`)
	messageMember = []byte(`,"message":`)
)

// update is a line split into what changes little from one event to the
// next (step: the assistantMessageEvent without its partial; nil in a
// message line) and the partial message.
type update struct {
	step    *node  // an object, or nil
	kind    []byte // a message line's type (typeStart or typeEnd); nil for an update
	partial *node
}

// ends reports whether u is the last line of its message.
func (u *update) ends() bool { return bytes.Equal(u.kind, typeEnd) }

// parseUpdate splits line when it has one of the shapes above; the
// tree's nodes come from a (nil: a fresh arena).
func parseUpdate(line []byte, a *arena) (*update, bool) {
	if a == nil {
		a = new(arena)
	}
	if bytes.HasPrefix(line, []byte(`{"type":"message_start","message":{`)) || bytes.HasPrefix(line, []byte(`{"type":"message_end","message":{`)) {
		n, err := parseTree(line, a)
		if err != nil || len(n.keys) != 2 || n.kids[1].kind != '{' {
			return nil, false
		}
		return &update{kind: n.kids[0].raw, partial: n.kids[1]}, true
	}
	if !bytes.HasPrefix(line, linePrefix) {
		return nil, false
	}
	// Only the assistantMessageEvent is parsed: the message after it must
	// be the partial again, byte for byte, which a comparison tells (at
	// memory speed, where parsing it would scan it a second time).
	p := &parser{b: line, i: len(linePrefix), depth: 1, arena: a}
	ev, err := p.value()
	if err != nil || ev.kind != '{' {
		return nil, false
	}
	last := len(ev.keys) - 1
	if last < 0 || !bytes.Equal(ev.keys[last], keyPartial) || ev.kids[last].kind != '{' || slicesIndex(ev.keys[:last], keyPartial) >= 0 {
		return nil, false
	}
	message, ok := bytes.CutPrefix(line[p.i:], messageMember)
	if !ok || len(message) != len(ev.kids[last].raw)+1 || message[len(message)-1] != '}' || !bytes.Equal(message[:len(message)-1], ev.kids[last].raw) {
		return nil, false
	}
	step := &node{kind: '{', keys: ev.keys[:last:last], kids: ev.kids[:last:last]}
	return &update{step: step, partial: ev.kids[last]}, true
}

// size is len(u.line()), without writing.
func (u *update) size() int {
	if u.step == nil {
		return len(`{"type":,"message":}`) + len(u.kind) + u.partial.size()
	}
	return len(linePrefix) + u.step.size() + len(`,"partial":},"message":}`) + 2*u.partial.size()
}

// line writes u as pi does.
func (u *update) line() []byte {
	out := make([]byte, 0, u.size())
	if u.step == nil {
		out = append(out, `{"type":`...)
		out = append(out, u.kind...)
		out = append(out, `,"message":`...)
		out = u.partial.appendTo(out)
		return append(out, '}')
	}
	out = append(out, linePrefix...)
	out = u.step.appendTo(out)
	out = out[:len(out)-1] // the step's '}'
	if len(u.step.keys) > 0 {
		out = append(out, ',')
	}
	out = append(out, keyPartial...)
	out = append(out, ':')
	start := len(out)
	out = u.partial.appendTo(out)
	p := out[start:]
	out = append(out, `},"message":`...)
	out = append(out, p...)
	return append(out, '}')
}

// delta returns the escaped body of the step's "delta" string, or nil.
func (u *update) delta() []byte {
	if u.step == nil {
		return nil
	}
	i := slicesIndex(u.step.keys, keyDelta)
	if i < 0 || !u.step.kids[i].isString() {
		return nil
	}
	r := u.step.kids[i].raw
	return r[1 : len(r)-1]
}

func slicesIndex(keys [][]byte, k []byte) int {
	for i, x := range keys {
		if bytes.Equal(x, k) {
			return i
		}
	}
	return -1
}

// Op kinds, one letter on the wire (docs/protocol.md).
const (
	opSet    = 'v' // [path,"v",value]: replace the value at path
	opKey    = 'k' // [path,"k",key,value]: add a member to the object at path
	opAppend = 'a' // [path,"a",value]: add an element to the array at path
	opString = 's' // [path,"s","suffix"]: append to the string at path
	opDelta  = 'd' // [path,"d"]: append the step's delta to the string at path
)

// op is one change from a partial message to the next. A path is a list of
// member positions (in objects and arrays alike), from the partial down.
type op struct {
	path []int
	kind byte
	key  []byte // opKey
	val  []byte // opSet, opKey, opAppend: a value; opString: the string, quotes included
	node *node  // val parsed (rebuild side)
}

// valued reports whether a short entry carries this op's value.
func (o *op) valued() bool { return o.kind == opSet || o.kind == opString }

func appendPath(dst []byte, path []int) []byte {
	dst = append(dst, '[')
	for i, p := range path {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(p), 10)
	}
	return append(dst, ']')
}

func (o *op) appendTo(dst []byte) []byte {
	dst = appendPath(append(dst, '['), o.path)
	dst = append(dst, ',', '"', o.kind, '"')
	if o.kind == opKey {
		dst = append(dst, ',')
		dst = append(dst, o.key...)
	}
	if o.kind != opDelta {
		dst = append(dst, ',')
		dst = append(dst, o.val...)
	}
	return append(dst, ']')
}

// Errors of a rebuild. A rebuild error means the agent sent something this
// codec cannot have produced: the connection is not to be trusted further.
var (
	ErrNoBase   = errors.New("streamdelta: coded update without the event it is coded against")
	ErrBadEntry = errors.New("streamdelta: malformed update")
	ErrTooLarge = errors.New("streamdelta: rebuilt event larger than a frame")
	ErrNotHeld  = errors.New("streamdelta: reference to a message the connection does not hold")
)

func badEntry(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadEntry, fmt.Sprintf(format, args...))
}

// apply carries out o on the partial message root and returns the new
// root. root's tree is left as it was (a Line not yet written reads it):
// the nodes on o's path are copies, the rest is shared. The copies come
// from a's blocks (a nil a allocates them: rebuild_arena.go). The ops come
// from the wire: every step is checked.
func (o *op) apply(root *node, delta []byte, a *arena) (*node, error) {
	top, parent, at, n, ok := a.copyPath(root, o.path)
	if !ok {
		return nil, badEntry("path %v leaves the message", o.path)
	}
	switch o.kind {
	case opSet:
		if parent == nil {
			if o.node.kind != '{' {
				return nil, badEntry("the partial message must stay an object")
			}
			return o.node, nil
		}
		parent.kids[at] = o.node
	case opKey:
		if n.kind != '{' {
			return nil, badEntry("op k on a non-object at %v", o.path)
		}
		n.raw = nil
		n.keys = append(slices.Clip(n.keys), o.key)
		n.kids = append(slices.Clip(n.kids), o.node)
	case opAppend:
		if n.kind != '[' {
			return nil, badEntry("op a on a non-array at %v", o.path)
		}
		n.raw = nil
		n.kids = append(slices.Clip(n.kids), o.node)
	case opString, opDelta:
		if !n.isString() {
			return nil, badEntry("op %c on a non-string at %v", o.kind, o.path)
		}
		suffix := delta
		if o.kind == opString {
			suffix = o.val[1 : len(o.val)-1]
		} else if delta == nil {
			return nil, badEntry("op d without a delta in the step")
		}
		n.appendString(suffix)
	default:
		return nil, badEntry("unknown op %q", o.kind)
	}
	return top, nil
}

// copy returns a node that reads as n does and can be changed without
// changing n (its members' slices are clipped, so appending copies them).
func (n *node) copy() *node {
	c := *n
	c.keys, c.kids = slices.Clip(c.keys), slices.Clip(c.kids)
	return &c
}
