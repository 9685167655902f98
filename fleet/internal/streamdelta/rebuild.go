package streamdelta

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"example.com/pifleet/internal/jsonscan"
	"example.com/pifleet/transport"
)

// Rebuilder turns the event_delta frames of one connection back into the
// events they code (server side). Its state is one partial message per
// worker whose stream is mid-message; a new connection starts a new
// Rebuilder, so nothing coded on one connection is read against another.
type Rebuilder struct {
	max    int
	chains map[string]*chain
	done   map[string]*held // the finished messages held, per worker
	arena  arena            // nodes for the trees of the entries
	deltas []byte           // a block the deltas of short entries are copied to
}

type chain struct {
	seq  uint64
	u    update
	ops  []op  // what the last update was coded with; nil after a whole one
	line *Line // the event of seq, as emitted
	// In a run of updates that append their delta to one string (grow),
	// text is that string (open), which u.partial has at ops[0].path as
	// it was when the run began (stale, stale bytes long): settled puts
	// it in.
	text  []byte
	stale int
}

// lineage names a chain for its Lines (Line.DeltaAfter). It has a size so
// that each is a distinct allocation, with an address of its own.
type lineage struct{ _ byte }

// NewRebuilder returns a Rebuilder whose events are at most maxLine bytes
// (an event larger than a frame could not have been sent whole).
func NewRebuilder(maxLine int) *Rebuilder {
	return &Rebuilder{max: maxLine, chains: map[string]*chain{}, done: map[string]*held{}}
}

// RebuildFrame calls emit with each event of f, in order, as the event
// frame it stands for. head, when not nil, is a short line that reads
// the same as the event apart from its partial message (a message_update
// without it), for a reader that wants only the step. On an error (a
// frame this codec cannot have written) the events before it were
// emitted and the worker's state is dropped.
func (r *Rebuilder) RebuildFrame(f *transport.EventDeltaFrame, emit func(ev *transport.EventFrame, head []byte)) error {
	return r.RebuildFrameLines(f, func(seq uint64, line *Line, head []byte) {
		s := float64(seq)
		emit(&transport.EventFrame{InstanceID: f.InstanceID, Event: line.Bytes(), Seq: &s}, head)
	})
}

// RebuildFrameLines is RebuildFrame for a reader that may not want every
// event's bytes: each event comes as a Line, written out only when read
// (head as in RebuildFrame).
func (r *Rebuilder) RebuildFrameLines(f *transport.EventDeltaFrame, emit func(seq uint64, line *Line, head []byte)) error {
	seq, ok := wholeNumber(f.Seq)
	if !ok {
		return badEntry("seq %v is not a whole number", f.Seq)
	}
	var base *uint64
	if f.Base != nil {
		b, ok := wholeNumber(*f.Base)
		if !ok {
			return badEntry("base %v is not a whole number", *f.Base)
		}
		base = &b
	}
	return r.RebuildLines(f.InstanceID, seq, base, f.Updates, emit)
}

// Line is one rebuilt event. A rebuilt message_update (the whole partial
// message, twice) is written out on the first call of Bytes, not before:
// an answer of n characters streamed in small chunks is O(n²) bytes of
// events, of which a reader that wants only the steps pays nothing. The
// Rebuilder goes on meanwhile without changing what a Line reads (it
// keeps the partial message as a tree whose changed parts are copies).
// Bytes may be called from any goroutine.
type Line struct {
	once sync.Once
	u    update // until written (u.partial is nil after, and in a whole line)
	b    []byte
	// A rebuilt line knows its chain and its place in it (n): the line it
	// was coded against is the one before it there. It does not point at
	// that line, which would keep the message's history alive (O(n²)
	// bytes once written).
	chain *lineage
	n     uint64
	// A message_update rebuilt from a coded entry also keeps that entry,
	// self-contained (Line.DeltaAfter): as it came (entry), or, for a
	// short entry without values, its step and ops (the chain's), from
	// which DeltaAfter writes it when asked; most are never asked for.
	entry []byte
	step  *node
	ops   []op
	// An update of a run that grows a string (grow) is its chain's
	// partial message with text at ops[0].path, put in when written.
	text []byte
}

// WholeLine returns the Line of an event already written.
func WholeLine(b []byte) *Line { return &Line{b: b} }

// Bytes returns the event's bytes, written on the first call.
func (l *Line) Bytes() []byte {
	l.once.Do(func() {
		if l.u.partial != nil {
			if l.text != nil {
				l.u.partial = withString(l.u.partial, l.ops[0].path, l.text, nil)
			}
			l.b, l.u, l.text = l.u.line(), update{}, nil
		}
	})
	return l.b
}

// StepAfter reports whether l is a message_update whose step (its
// assistantMessageEvent without the partial) is prev's with only the
// value of its "delta" member changed, to the JSON string delta (quotes
// included), and whether no other member of the step has a name a JSON
// decoder could read as "delta" (in another case, or escaped): a reader
// that decoded prev's step then has l's by decoding delta alone. ok is
// false for any other pair of lines (l was then rebuilt otherwise, or
// prev is not the line l was coded against).
func (l *Line) StepAfter(prev *Line) (delta []byte, ok bool) {
	if !l.follows(prev) || l.step == nil {
		return nil, false
	}
	di := -1
	for i, k := range l.step.keys {
		switch {
		case bytes.Equal(k, keyDelta):
			if di >= 0 {
				return nil, false
			}
			di = i
		case bytes.IndexByte(k, '\\') >= 0 || bytes.EqualFold(k, keyDelta):
			return nil, false
		}
	}
	if di < 0 {
		return nil, false
	}
	return l.step.kids[di].raw, true
}

// follows reports whether l was coded against prev: the line before it in
// its chain.
func (l *Line) follows(prev *Line) bool {
	return l != nil && prev != nil && l.chain != nil && prev.chain == l.chain && prev.n+1 == l.n
}

// wholeSeq reads a seq in a reference: digits only, at most 2^53.
func wholeSeq(n *node) (uint64, bool) {
	if n.kind != 0 || len(n.raw) == 0 || len(n.raw) > 16 || len(n.raw) > 1 && n.raw[0] == '0' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(n.raw), 10, 64)
	return v, err == nil && v <= 1<<53
}

func wholeNumber(f float64) (uint64, bool) {
	if f < 0 || f > 1<<53 || f != math.Trunc(f) {
		return 0, false
	}
	return uint64(f), true
}

// Forget drops the state of a worker (its instance ended).
func (r *Rebuilder) Forget(instanceID string) {
	delete(r.chains, instanceID)
	delete(r.done, instanceID)
}

// Rebuild calls emit with each event coded in updates (a JSON array),
// the first of seq, coded against the event of base when that is not nil
// (head as in RebuildFrame).
func (r *Rebuilder) Rebuild(instanceID string, seq uint64, base *uint64, updates []byte, emit func(seq uint64, line, head []byte)) error {
	return r.RebuildLines(instanceID, seq, base, updates, func(seq uint64, line *Line, head []byte) { emit(seq, line.Bytes(), head) })
}

// RebuildLines is Rebuild with each event as a Line.
func (r *Rebuilder) RebuildLines(instanceID string, seq uint64, base *uint64, updates []byte, emit func(seq uint64, line *Line, head []byte)) (err error) {
	defer func() {
		if err != nil {
			delete(r.chains, instanceID)
			err = fmt.Errorf("event_delta of %s at seq %d: %w", instanceID, seq, err)
		}
	}()
	if len(updates) < 2 || updates[0] != '[' || updates[len(updates)-1] != ']' {
		return badEntry("updates is not an array")
	}
	i, first := 1, true
	for i < len(updates)-1 {
		if !first {
			if updates[i] != ',' {
				return badEntry("want ',' between updates")
			}
			i++
			seq++
		}
		end, err := skipValue(updates, i)
		if err != nil {
			return badEntry("update: %v", err)
		}
		entry := updates[i:end]
		i = end
		want := seq - 1
		if first {
			if base == nil {
				want = math.MaxUint64 // only a whole update may come first
			} else {
				want = *base
			}
		}
		if first && base != nil && (bytes.HasPrefix(entry, []byte(`{"e":`)) || bytes.HasPrefix(entry, []byte(`{"m":`))) {
			return badEntry("base given for a whole update")
		}
		var run []byte // a joined run's delta
		if bytes.HasPrefix(entry, []byte(`{"c":`)) {
			var n uint64
			if n, run, err = joinedRun(entry); err != nil {
				return err
			}
			if seq+n-1 > 1<<53 {
				return badEntry("a run of %d updates at seq %d passes 2^53", n, seq)
			}
			seq += n - 1 // the run is its last update
		}
		line, head, err := r.entry(instanceID, seq, want, entry, run)
		if err != nil {
			return err
		}
		emit(seq, line, head)
		first = false
	}
	if first {
		return badEntry("no updates")
	}
	return nil
}

// entry rebuilds one update; base is the seq it must be coded against,
// run the delta of a joined run's entry (nil for any other entry). What
// the connection holds of the worker's finished messages follows.
func (r *Rebuilder) entry(instanceID string, seq, base uint64, entry, run []byte) (*Line, []byte, error) {
	line, head, err := r.rebuildEntry(instanceID, seq, base, entry, run)
	if err != nil {
		return nil, nil, err
	}
	if line.u.partial == nil && endsRun(line.b) { // an update written lazily is a message_update
		delete(r.done, instanceID)
	}
	return line, head, nil
}

// hold records the message of the message_end of seq.
func (r *Rebuilder) hold(instanceID string, seq uint64, msg []byte) {
	h := r.done[instanceID]
	if h == nil {
		h = &held{}
		r.done[instanceID] = h
	}
	h.add(seq, len(msg), msg, true)
}

func (r *Rebuilder) rebuildEntry(instanceID string, seq, base uint64, entry, run []byte) (*Line, []byte, error) {
	if bytes.HasPrefix(entry, []byte(`{"m":`)) {
		delete(r.chains, instanceID)
		line, err := r.resolve(instanceID, entry)
		if err != nil {
			return nil, nil, err
		}
		return WholeLine(line), nil, nil
	}
	if whole, ok := bytes.CutPrefix(entry, []byte(`{"e":`)); ok {
		line := whole
		if len(line) < 2 || line[len(line)-1] != '}' {
			return nil, nil, badEntry("whole update not closed")
		}
		line = line[:len(line)-1]
		if end, err := skipValue(line, 0); err != nil || end != len(line) {
			return nil, nil, badEntry("whole update is not one JSON value")
		}
		u, ok := parseUpdate(line, &r.arena)
		out := WholeLine(line)
		if ok && !u.ends() {
			out.chain = new(lineage)
			r.chains[instanceID] = &chain{seq: seq, u: *u, line: out}
		} else {
			delete(r.chains, instanceID)
		}
		if ok && u.ends() {
			// A copy: line is part of the frame.
			r.hold(instanceID, seq, bytes.Clone(u.partial.raw))
		}
		return out, nil, nil
	}
	ch := r.chains[instanceID]
	if ch == nil || ch.seq != base {
		return nil, nil, ErrNoBase
	}
	var (
		n  *node
		ok bool
	)
	switch {
	case run != nil:
		// The updates of the run all have the shape of the one before
		// them, and their ops only append the delta: the last one is
		// the short entry of their deltas joined.
		n, ok = r.deltaNode(entry, run), true
	case entry[0] == '{':
		// A copy, which the tree reads and the Line keeps (entry is part
		// of the frame): the short entries after it share its step.
		entry = bytes.Clone(entry)
	default:
		n, ok = r.deltaOnly(entry)
	}
	if !ok {
		var perr error
		if n, perr = parseTree(entry, &r.arena); perr != nil {
			return nil, nil, badEntry("%v", perr)
		}
	}
	var (
		u      update
		ops    []op
		refs   *node
		shared bool // ops are the chain's
		err    error
	)
	switch n.kind {
	case '{':
		u.step, u.kind, ops, refs, err = parseDelta(n)
	case '[':
		u.step, ops, shared, err = ch.short(n, &r.arena)
	default:
		err = badEntry("an update is an object or an array")
	}
	if err != nil {
		return nil, nil, err
	}
	if shared && len(ops) == 1 && ops[0].kind == opDelta {
		return r.grow(ch, seq, u.step, ops)
	}
	u.partial = r.settled(ch)
	delta := u.delta()
	for i := range ops {
		if u.partial, err = ops[i].apply(u.partial, delta, &r.arena); err != nil {
			return nil, nil, err
		}
	}
	if refs != nil {
		if err := resolveRefs(&u, refs); err != nil {
			return nil, nil, err
		}
	}
	if size := u.size(); size > r.max {
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
	}
	var head []byte
	if u.step != nil {
		head = headOf(u.step)
	}
	if u.ends() {
		delete(r.chains, instanceID)
		line := u.line()
		// The message is the line's: {"type":"message_end","message":P}.
		r.hold(instanceID, seq, line[len(line)-1-u.partial.size():len(line)-1])
		return WholeLine(line), head, nil
	}
	prev := ch.line
	ch.seq, ch.u, ch.ops = seq, u, ops
	if u.step == nil {
		ch.line = WholeLine(u.line()) // a message_start: one a message
	} else {
		ch.line = &Line{u: u}
		switch {
		case n.kind == '{':
			ch.line.entry = entry
		case shared:
			ch.line.step, ch.line.ops = u.step, ops
		default:
			// A short entry reads only after its chain's: the values it
			// carries go into a long one now (they are part of the frame).
			ch.line.entry = longEntry(u.step, ops)
		}
	}
	ch.line.chain, ch.line.n = prev.chain, prev.n+1
	return ch.line, head, nil
}

// headOf writes the head of an update of step: the line without the
// partial message.
func headOf(step *node) []byte {
	head := make([]byte, 0, len(linePrefix)+step.size()+1)
	return append(step.appendTo(append(head, linePrefix...)), '}')
}

// grow rebuilds a short entry whose one op appends the delta to a string
// (the chunks of a text): the string grows as appendString grows it (in
// place, past what its earlier versions read), and the update is the
// chain's partial message with that string put in when the Line is
// written. The nodes on the op's path are copied once per run of such
// updates (settled), not once per update.
func (r *Rebuilder) grow(ch *chain, seq uint64, step *node, ops []op) (*Line, []byte, error) {
	u := update{step: step, partial: ch.u.partial}
	leaf := node{raw: ch.text, open: true}
	if ch.text == nil {
		// The run begins: the checks of apply.
		n := u.partial
		for _, p := range ops[0].path {
			if n.kind == 0 || p < 0 || p >= len(n.kids) {
				return nil, nil, badEntry("path %v leaves the message", ops[0].path)
			}
			n = n.kids[p]
		}
		if !n.isString() {
			return nil, nil, badEntry("op %c on a non-string at %v", opDelta, ops[0].path)
		}
		leaf, ch.stale = *n, n.size()
	}
	delta := u.delta()
	if delta == nil {
		return nil, nil, badEntry("op d without a delta in the step")
	}
	leaf.appendString(delta)
	if size := u.size() + 2*(leaf.size()-ch.stale); size > r.max {
		return nil, nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
	}
	prev := ch.line
	ch.seq, ch.u, ch.text = seq, u, leaf.raw
	ch.line = &Line{u: u, chain: prev.chain, n: prev.n + 1, step: step, ops: ops, text: leaf.raw}
	return ch.line, headOf(step), nil
}

// settled returns the chain's partial message, with the string a run of
// updates grew put in.
func (r *Rebuilder) settled(ch *chain) *node {
	if ch.text != nil {
		ch.u.partial = withString(ch.u.partial, ch.ops[0].path, ch.text, &r.arena)
		ch.text = nil
	}
	return ch.u.partial
}

// withString returns root with the open string text at path (which leads
// to a string), the nodes on the path copied (from a's blocks; a nil a
// allocates them).
func withString(root *node, path []int, text []byte, a *arena) *node {
	top, _, _, n, _ := a.copyPath(root, path)
	n.raw, n.open = text, true
	return top
}

// deltaOnly reads a short entry that is a delta alone, ["…"] (how the
// chunks of a text are coded), as parseTree would, without its stacks.
func (r *Rebuilder) deltaOnly(entry []byte) (*node, bool) {
	delta, ok := deltaAlone(entry)
	if !ok {
		return nil, false
	}
	return r.deltaNode(entry, delta), true
}

// deltaNode is the short entry raw whose one member is the string delta
// (quotes included). The delta is copied to a block of r's: a Line keeps
// its step (for DeltaAfter), which must not keep the whole frame alive.
func (r *Rebuilder) deltaNode(raw, delta []byte) *node {
	if len(r.deltas)+len(delta) > cap(r.deltas) {
		r.deltas = make([]byte, 0, max(4<<10, len(delta)))
	}
	start := len(r.deltas)
	r.deltas = append(r.deltas, delta...)
	kid := r.arena.node(node{raw: r.deltas[start:len(r.deltas):len(r.deltas)]})
	return r.arena.node(node{kind: '[', raw: raw, kids: r.arena.clone([]*node{kid})})
}

// joinedRun reads the entry of a joined run of delta-only updates,
// {"c":n,"d":"…"} exactly so: n (at least 1) and the delta, quotes
// included.
func joinedRun(entry []byte) (n uint64, delta []byte, err error) {
	rest := entry[len(`{"c":`):]
	digits := 0
	for digits < len(rest) && digits <= 16 && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits == 0 || digits > 16 || rest[0] == '0' {
		return 0, nil, badEntry("a joined run's count is not a whole number from 1")
	}
	n, _ = strconv.ParseUint(string(rest[:digits]), 10, 64)
	rest, ok := bytes.CutPrefix(rest[digits:], []byte(`,"d":`))
	if !ok {
		return 0, nil, badEntry(`a joined run is {"c":count,"d":delta}`)
	}
	if len(rest) == 0 || rest[0] != '"' {
		return 0, nil, badEntry(`a joined run is {"c":count,"d":delta}`)
	}
	end, _ := jsonscan.SkipString(rest, 0)
	if end < 0 || end != len(rest)-1 || rest[end] != '}' {
		return 0, nil, badEntry(`a joined run is {"c":count,"d":delta}`)
	}
	return n, rest[:end], nil
}

// resolve rebuilds a line that refers to finished messages,
// {"m":template,"r":[[path,seq]…]}: each path leads to a null in the
// template, where the message of the message_end of seq goes.
func (r *Rebuilder) resolve(instanceID string, entry []byte) ([]byte, error) {
	n, err := parseTree(entry, &r.arena)
	if err != nil {
		return nil, badEntry("%v", err)
	}
	if len(n.keys) != 2 || string(n.keys[0]) != `"m"` || string(n.keys[1]) != `"r"` || n.kids[0].kind != '{' || n.kids[1].kind != '[' {
		return nil, badEntry(`a reference entry is {"m":line,"r":[…]}`)
	}
	tmpl, h, size := n.kids[0], r.done[instanceID], len(n.kids[0].raw)
	for _, ref := range n.kids[1].kids {
		if ref.kind != '[' || len(ref.kids) != 2 || ref.kids[0].kind != '[' {
			return nil, badEntry("a reference is [path, seq]")
		}
		seq, ok := wholeSeq(ref.kids[1])
		if !ok {
			return nil, badEntry("a reference's seq is a whole number")
		}
		at := -1
		if h != nil {
			at = h.at(seq)
		}
		if at < 0 {
			return nil, fmt.Errorf("%w: seq %d", ErrNotHeld, seq)
		}
		parent, i := (*node)(nil), -1
		m := tmpl
		for _, p := range ref.kids[0].kids {
			j, ok := smallIndex(p)
			if !ok || m.kind == 0 || j >= len(m.kids) {
				return nil, badEntry("a reference's path leaves the line")
			}
			m.raw = nil // its span is stale from here on
			parent, i, m = m, j, m.kids[j]
		}
		if parent == nil || m.kind != 0 || string(m.raw) != "null" {
			return nil, badEntry("a reference's path leads to something else than null")
		}
		if size += len(h.msgs[at]) - len("null"); size > r.max {
			return nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, size)
		}
		parent.kids[i] = &node{raw: h.msgs[at]}
	}
	return tmpl.appendTo(make([]byte, 0, size)), nil
}

// resolveRefs puts into the step the values refs ([[member, path]…])
// point at in the partial message.
func resolveRefs(u *update, refs *node) error {
	if refs.kind != '[' {
		return badEntry("r is an array")
	}
	for _, ref := range refs.kids {
		if ref.kind != '[' || len(ref.kids) != 2 || ref.kids[1].kind != '[' {
			return badEntry("a reference is [member, path]")
		}
		i, ok := smallIndex(ref.kids[0])
		if !ok || i >= len(u.step.kids) {
			return badEntry("a reference names a member the step lacks")
		}
		n := u.partial
		for _, p := range ref.kids[1].kids {
			j, ok := smallIndex(p)
			if !ok || n.kind == 0 || j >= len(n.kids) {
				return badEntry("a reference's path leaves the message")
			}
			n = n.kids[j]
		}
		// A copy: the partial message changes in place later on.
		u.step.kids[i] = &node{raw: n.appendTo(nil)}
	}
	return nil
}

// parseDelta reads {"u":step,"o":[op…]} (with "r":[refs…] after, when the
// step refers to the partial), or {"n":type,"o":[op…]} for a message line.
func parseDelta(n *node) (step *node, kind []byte, ops []op, refs *node, err error) {
	switch {
	case len(n.keys) == 2 && string(n.keys[0]) == `"n"` && string(n.keys[1]) == `"o"`:
		kind = n.kids[0].raw
		if n.kids[0].kind != 0 || !bytes.Equal(kind, typeStart) && !bytes.Equal(kind, typeEnd) {
			return nil, nil, nil, nil, badEntry("n is message_start or message_end")
		}
	case (len(n.keys) == 2 || len(n.keys) == 3 && string(n.keys[2]) == `"r"`) && string(n.keys[0]) == `"u"` && string(n.keys[1]) == `"o"`:
		step = n.kids[0]
		if step.kind != '{' || slicesIndex(step.keys, keyPartial) >= 0 {
			return nil, nil, nil, nil, badEntry("u is an object without the partial")
		}
		if len(n.keys) == 3 {
			refs = n.kids[2]
		}
	default:
		return nil, nil, nil, nil, badEntry(`a coded update is {"u","o"[,"r"]} or {"n","o"}`)
	}
	list := n.kids[1]
	if list.kind != '[' {
		return nil, nil, nil, nil, badEntry("o is an array")
	}
	ops = make([]op, 0, len(list.kids))
	for _, o := range list.kids {
		op, err := parseOp(o)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		ops = append(ops, op)
	}
	return step, kind, ops, refs, nil
}

func parseOp(n *node) (op, error) {
	if n.kind != '[' || len(n.kids) < 2 || n.kids[0].kind != '[' || !n.kids[1].isString() || len(n.kids[1].raw) != 3 {
		return op{}, badEntry("an op is [path, kind, …]")
	}
	var o op
	for _, p := range n.kids[0].kids {
		i, ok := smallIndex(p)
		if !ok {
			return op{}, badEntry("a path holds positions")
		}
		o.path = append(o.path, i)
	}
	o.kind = n.kids[1].raw[1]
	args := n.kids[2:]
	switch o.kind {
	case opDelta:
		if len(args) != 0 {
			return op{}, badEntry("op d takes nothing")
		}
	case opSet, opAppend, opString:
		if len(args) != 1 || o.kind == opString && !args[0].isString() {
			return op{}, badEntry("op %c takes one value", o.kind)
		}
		o.val, o.node = args[0].raw, args[0]
	case opKey:
		if len(args) != 2 || !args[0].isString() {
			return op{}, badEntry("op k takes a key and a value")
		}
		o.key, o.val, o.node = args[0].raw, args[1].raw, args[1]
	default:
		return op{}, badEntry("unknown op %q", o.kind)
	}
	return o, nil
}

// smallIndex reads a member position: digits only, below 2^31.
func smallIndex(n *node) (int, bool) {
	if n.kind != 0 || len(n.raw) == 0 || len(n.raw) > 10 || len(n.raw) > 1 && n.raw[0] == '0' {
		return 0, false
	}
	v := 0
	for _, c := range n.raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, v < math.MaxInt32
}

// short reads [delta, values…]: the last update's step and ops again,
// with a new delta and new values. When the ops take no values, they are
// the chain's own (shared: nothing changes them).
func (ch *chain) short(n *node, a *arena) (step *node, ops []op, shared bool, err error) {
	if ch.ops == nil {
		return nil, nil, false, ErrNoBase
	}
	if len(n.kids) == 0 || !n.kids[0].isString() {
		return nil, nil, false, badEntry("a short update starts with the delta")
	}
	prev := ch.u.step
	if prev == nil {
		return nil, nil, false, badEntry("short update after a message line")
	}
	di := slicesIndex(prev.keys, keyDelta)
	if di < 0 {
		return nil, nil, false, badEntry("short update after a step without a delta")
	}
	step = a.node(node{kind: '{', keys: prev.keys, kids: a.clone(prev.kids)})
	step.kids[di] = n.kids[0]
	vals := n.kids[1:]
	valued := 0
	for i := range ch.ops {
		if ch.ops[i].kind != opDelta && !ch.ops[i].valued() {
			// Members added once cannot be added again (the encoder never
			// repeats such a shape).
			return nil, nil, false, badEntry("short update after an op %c", ch.ops[i].kind)
		}
		if ch.ops[i].valued() {
			valued++
		}
	}
	if valued == 0 && len(vals) == 0 {
		return step, ch.ops, true, nil
	}
	ops = slices.Clone(ch.ops)
	for i := range ops {
		if !ops[i].valued() {
			continue
		}
		if len(vals) == 0 {
			return nil, nil, false, badEntry("short update lacks values")
		}
		v := vals[0]
		vals = vals[1:]
		if ops[i].kind == opString && !v.isString() {
			return nil, nil, false, badEntry("short update: op s takes a string")
		}
		ops[i].val, ops[i].node = v.raw, v
	}
	if len(vals) != 0 {
		return nil, nil, false, badEntry("short update has values left over")
	}
	return step, ops, false, nil
}
