package streamdelta

import (
	"bytes"
	"slices"
	"strconv"

	"example.com/pifleet/transport"
)

// Encoder codes one worker's stream of events (agent side). It holds the
// last message_update it saw, the base of the next one.
type Encoder struct {
	base    *update
	baseSeq uint64
	// ops coded base against its own predecessor (nil when it had none):
	// the shape a short entry repeats.
	ops []op
	// done is the finished messages of the run so far, which a later
	// line may refer to (msgs are spans of the worker's lines).
	done held
	// arena gives the trees of the lines their nodes.
	arena arena
	// grow follows the base while updates only append their delta to one
	// string (grow.go); base is then nil, and parsed from grow.line only
	// when a line is not such an update.
	grow growth
	// parseAll turns grow off (the tests compare both ways).
	parseAll bool
}

// Coded is one event, coded for every kind of receiver. Which form a
// connection gets depends on what it received before (Chain.Pick).
type Coded struct {
	Seq  uint64
	line []byte
	// base is the seq of the event delta and short are coded against.
	base  uint64
	delta []byte // {"u":step,"o":[ops]}; nil when the event has no base
	short []byte // [delta, values…]; nil when the shape changed
	// links says the event is a base for the next one.
	links bool
	// finished is the size of the message a message_end line finishes
	// (0 for any other line): a connection that gets it holds it.
	finished int
	// tree and refs: a line that repeats finished messages, parsed, and
	// where it does (a connection that holds them gets a reference).
	tree *node
	refs []found
	// endsRun says the line is an agent_end.
	endsRun bool
}

// Encode codes the event line of seq, a worker's next event in the stream
// the encoder follows. The encoder keeps line while later lines are coded
// against it, so line must not change (worker events never do).
func (e *Encoder) Encode(seq uint64, line []byte) Coded {
	c := Coded{Seq: seq, line: line}
	if e.grow.line != nil && !e.parseAll {
		if delta, ok := e.grow.next(line); ok {
			c.base, c.links = e.baseSeq, true
			e.grow, c.delta, c.short = e.grow.grown(line, delta)
			e.base, e.baseSeq = nil, seq
			return c
		}
		if e.base == nil {
			e.base, _ = parseUpdate(e.grow.line, &e.arena)
		}
	}
	e.grow = growth{}
	if repeats(line) {
		e.base, e.ops = nil, nil
		if len(e.done.seqs) > 0 {
			if n, err := parseTree(line, &e.arena); err == nil {
				c.tree, c.refs = n, findHeld(&e.done, n, nil, nil)
			}
		}
		if endsRun(line) {
			c.endsRun = true
			e.done.empty()
		}
		return c
	}
	u, ok := parseUpdate(line, &e.arena)
	prev, prevOps, prevSeq := e.base, e.ops, e.baseSeq
	e.base, e.ops = nil, nil
	if !ok {
		return c
	}
	if u.ends() {
		c.finished = len(u.partial.raw)
		e.done.add(seq, c.finished, u.partial.raw, true)
	} else {
		c.links = true
		e.base, e.baseSeq = u, seq
	}
	if prev == nil {
		return c
	}
	var ops []op
	diff(prev.partial, u.partial, nil, u.delta(), &ops)
	if c.links {
		e.ops = ops
	}
	c.base = prevSeq
	c.delta = deltaEntry(u, ops)
	if sameShape(prev, prevOps, u, ops) {
		c.short = shortEntry(u.delta(), ops)
	}
	if c.links {
		e.grow, _ = followGrowth(line, u, ops, c.delta)
	}
	return c
}

// Reset forgets the base and the finished messages: the next update is
// coded whole.
func (e *Encoder) Reset() { *e = Encoder{} }

// diff appends to ops what turns a into b. Equal spans are skipped at
// memory speed; strings that grew become appends.
func diff(a, b *node, path []int, delta []byte, ops *[]op) {
	if bytes.Equal(a.raw, b.raw) {
		return
	}
	set := func() { *ops = append(*ops, op{path: slices.Clone(path), kind: opSet, val: b.raw}) }
	if a.kind != b.kind {
		set()
		return
	}
	switch a.kind {
	case '{':
		if len(b.keys) < len(a.keys) {
			set()
			return
		}
		for i, k := range a.keys {
			if !bytes.Equal(k, b.keys[i]) {
				set()
				return
			}
		}
		for i := range a.kids {
			diff(a.kids[i], b.kids[i], append(path, i), delta, ops)
		}
		for i := len(a.keys); i < len(b.keys); i++ {
			*ops = append(*ops, op{path: slices.Clone(path), kind: opKey, key: b.keys[i], val: b.kids[i].raw})
		}
	case '[':
		if len(b.kids) < len(a.kids) {
			set()
			return
		}
		for i := range a.kids {
			diff(a.kids[i], b.kids[i], append(path, i), delta, ops)
		}
		for i := len(a.kids); i < len(b.kids); i++ {
			*ops = append(*ops, op{path: slices.Clone(path), kind: opAppend, val: b.kids[i].raw})
		}
	default:
		if a.isString() && b.isString() && len(b.raw) > len(a.raw) && bytes.HasPrefix(b.raw, a.raw[:len(a.raw)-1]) {
			suffix := b.raw[len(a.raw)-1 : len(b.raw)-1]
			if delta != nil && bytes.Equal(suffix, delta) {
				*ops = append(*ops, op{path: slices.Clone(path), kind: opDelta})
				return
			}
			// The suffix with quotes around it is a JSON string: b.raw's
			// body from a point where a's escapes ended.
			q := make([]byte, 0, len(suffix)+2)
			q = append(append(append(q, '"'), suffix...), '"')
			*ops = append(*ops, op{path: slices.Clone(path), kind: opString, val: q})
			return
		}
		set()
	}
}

// sameShape reports whether cur repeats prev's step (all but the delta)
// and ops (paths and kinds), so that a short entry says it all.
func sameShape(prev *update, prevOps []op, cur *update, ops []op) bool {
	if prevOps == nil || len(prevOps) != len(ops) || prev.delta() == nil || cur.delta() == nil {
		return false
	}
	if len(prev.step.keys) != len(cur.step.keys) {
		return false
	}
	for i, k := range prev.step.keys {
		if !bytes.Equal(k, cur.step.keys[i]) {
			return false
		}
		if !bytes.Equal(k, keyDelta) && !bytes.Equal(prev.step.kids[i].raw, cur.step.kids[i].raw) {
			return false
		}
	}
	for i := range ops {
		if ops[i].kind != prevOps[i].kind || (!ops[i].valued() && ops[i].kind != opDelta) || !slices.Equal(ops[i].path, prevOps[i].path) {
			return false
		}
	}
	return true
}

// refMin is the size from which a step's value that the partial message
// holds too (text_end's content, toolcall_end's toolCall) is sent as a
// reference to it.
const refMin = 48

func deltaEntry(u *update, ops []op) []byte {
	var out []byte
	if u.step == nil {
		out = append(append([]byte(`{"n":`), u.kind...), `,"o":[`...)
		out = appendOps(out, ops)
		return append(out, "]}"...)
	}
	// Step values the partial holds as well go as references, but never
	// the delta: op d appends it to the partial before references are
	// resolved (and a text's first delta is the whole text).
	var refs []byte
	step := u.step
	for i, v := range u.step.kids {
		if len(v.raw) < refMin || bytes.Equal(u.step.keys[i], keyDelta) {
			continue
		}
		path, ok := find(u.partial, v.raw, nil)
		if !ok {
			continue
		}
		if step == u.step {
			step = &node{kind: '{', keys: u.step.keys, kids: slices.Clone(u.step.kids)}
		}
		step.kids[i] = &node{raw: []byte("null")}
		if refs != nil {
			refs = append(refs, ',')
		}
		refs = strconv.AppendInt(append(refs, '['), int64(i), 10)
		refs = append(appendPath(append(refs, ','), path), ']')
	}
	out = append([]byte(`{"u":`), step.appendTo(nil)...)
	out = append(out, `,"o":[`...)
	out = appendOps(out, ops)
	out = append(out, ']')
	if refs != nil {
		out = append(append(append(out, `,"r":[`...), refs...), ']')
	}
	return append(out, '}')
}

func appendOps(out []byte, ops []op) []byte {
	for i := range ops {
		if i > 0 {
			out = append(out, ',')
		}
		out = ops[i].appendTo(out)
	}
	return out
}

// find looks for the value raw in n, a few levels deep, by its bytes.
func find(n *node, raw []byte, path []int) ([]int, bool) {
	if len(n.raw) == len(raw) && bytes.Equal(n.raw, raw) {
		return path, true
	}
	if n.kind == 0 || len(n.raw) < len(raw) || len(path) >= 3 {
		return nil, false
	}
	for i, k := range n.kids {
		if p, ok := find(k, raw, append(path, i)); ok {
			return p, true
		}
	}
	return nil, false
}

func shortEntry(delta []byte, ops []op) []byte {
	out := make([]byte, 0, len(delta)+4)
	out = append(append(append(out, '['), '"'), delta...)
	out = append(out, '"')
	for i := range ops {
		if ops[i].valued() {
			out = append(append(out, ','), ops[i].val...)
		}
	}
	return append(out, ']')
}

// Chain is what one connection received of a worker's stream: the codec's
// state on the sending side, one per connection and worker.
type Chain struct {
	seq   uint64
	has   bool // the connection holds the event of seq as a base
	shape bool // ... and the ops it was coded with
	done  held // the finished messages the connection holds (sizes only)
}

// Codes reports whether Pick would code c (rather than send it whole).
func (ch *Chain) Codes(c *Coded) bool { return ch.has && ch.seq == c.base && c.delta != nil }

// Pick returns the entry this connection gets for c, and records that it
// got it. ok is false when the connection has no base for c: the entry is
// then the whole event.
func (ch *Chain) Pick(c *Coded) (entry []byte, coded bool) {
	if c.tree != nil || c.endsRun {
		return ch.pickRepeat(c), false
	}
	if c.finished > 0 {
		defer ch.done.add(c.Seq, c.finished, nil, false)
	}
	prevOK, prevShape := ch.Codes(c), ch.shape
	ch.seq, ch.has = c.Seq, c.links
	switch {
	case prevOK && prevShape && c.short != nil:
		ch.shape = true
		return c.short, true
	case prevOK:
		ch.shape = true
		return c.delta, true
	default:
		ch.shape = false
		return wholeEntry(c.line), false
	}
}

// pickRepeat returns the entry of a line that repeats finished messages:
// references to those the connection holds, the rest as it is.
func (ch *Chain) pickRepeat(c *Coded) []byte {
	ch.has, ch.shape = false, false
	var refs []found
	for _, r := range c.refs {
		if ch.done.at(r.seq) >= 0 {
			refs = append(refs, r)
		}
	}
	if c.endsRun {
		ch.done.empty()
	}
	if refs == nil || len(c.line) > transport.MaxFrameBytes {
		// Nothing to refer to, or a line no frame holds, which a server
		// would not rebuild either.
		return wholeEntry(c.line)
	}
	return refEntry(c.tree, refs)
}

// Reset forgets what the connection received: the next entry is whole.
func (ch *Chain) Reset() { *ch = Chain{} }

func wholeEntry(line []byte) []byte {
	out := make([]byte, 0, len(line)+6)
	out = append(out, `{"e":`...)
	out = append(out, line...)
	return append(out, '}')
}
