package streamdelta

import (
	"bytes"

	"example.com/pifleet/internal/jsonscan"
)

// Growth is where a message_update line grows when the next line is the
// usual update, one more chunk of text: that line is, byte for byte, this
// one with a new delta in three places: the step's delta, and the end of
// the string the delta was appended to, in both copies of the partial
// message. Telling whether a line is that takes a comparison at memory
// speed; parsing it builds (or scans) every member of a message that
// grows with the answer. The encoder follows a Growth instead of parsing
// such lines, and so does the agent's worker, which decodes each line of
// its pi.
type Growth struct {
	line   []byte // the line; nil when there is no growth to follow
	d0, d1 int    // the body of the step's delta in line
	t1, t2 int    // the closing quotes of the string that grows, in the partial and in message
}

// growth is a Growth the encoder follows, with the base's coded form.
//
// The coded forms come out byte for byte as a parse would code them:
// the short entry is the delta alone, and the long one is the base's with
// the delta replaced (TestGrowthCodesAsTheParse and FuzzGrowthCodesAsTheParse
// compare the two paths).
type growth struct {
	Growth
	entry []byte // the base's long entry ({"u":step,"o":[op]})
	e0    int    // where the delta's body starts in entry (it ends at e0+d1-d0)
}

// GrowthOf returns the growth of line, a message_update that follows prev,
// when the next update may repeat it with a new delta: line's partial
// message is prev's with line's delta appended to one of its strings, and
// nothing else changed in it (line's step may differ from prev's). ok is
// false otherwise, and for a line whose step could be read as naming its
// delta twice (a "Delta" beside the "delta", an escaped key): a decoder
// must read the delta from the member Next replaces.
func GrowthOf(prev, line []byte) (g Growth, ok bool) {
	var f GrowthFinder
	return f.Of(prev, line)
}

// GrowthFinder finds growths as GrowthOf does, with the memory of one
// call's parses used again by the next (nothing they parse outlives the
// call): a worker's reader tries at every block of every answer. The zero
// value is ready to use; a GrowthFinder is not safe for concurrent use.
type GrowthFinder struct{ a arena }

// Of is GrowthOf(prev, line).
func (f *GrowthFinder) Of(prev, line []byte) (g Growth, ok bool) {
	// A growth's step names its delta, and quotes in strings are escaped:
	// a line without the key's bytes (a block's start or end, every text's
	// last update) is told without parsing the two lines.
	if !bytes.Contains(line, keyDeltaMember) {
		return Growth{}, false
	}
	defer f.a.reuse()
	p, ok1 := parseUpdate(prev, &f.a)
	u, ok2 := parseUpdate(line, &f.a)
	if !ok1 || !ok2 || p.step == nil || u.step == nil {
		return Growth{}, false
	}
	delta := 0
	for _, k := range u.step.keys {
		if bytes.IndexByte(k, '\\') >= 0 {
			return Growth{}, false
		}
		if bytes.EqualFold(k, keyDelta) {
			delta++
		}
	}
	if delta != 1 {
		return Growth{}, false
	}
	var ops []op
	diff(p.partial, u.partial, nil, u.delta(), &ops)
	return lineGrowth(line, u, ops)
}

// lineGrowth returns the growth of line, the update u whose partial ops
// changed from the line before it: one op d.
func lineGrowth(line []byte, u *update, ops []op) (g Growth, ok bool) {
	delta := u.delta()
	if len(ops) != 1 || ops[0].kind != opDelta || delta == nil {
		return Growth{}, false
	}
	d0, ok := offsetIn(line, delta) // op d appends a delta: it is not empty
	if !ok {
		return Growth{}, false
	}
	g = Growth{line: line, d0: d0, d1: d0 + len(delta)}
	s := u.partial
	for _, i := range ops[0].path {
		if s.kind == 0 || i >= len(s.kids) {
			return Growth{}, false
		}
		s = s.kids[i]
	}
	sOff, ok1 := offsetIn(line, s.raw)
	pOff, ok2 := offsetIn(line, u.partial.raw)
	if !ok1 || !ok2 || !s.isString() || s.open {
		return Growth{}, false
	}
	// message is the line's last member: the partial again, then '}'.
	g.t1 = sOff + len(s.raw) - 1
	g.t2 = g.t1 + (len(line) - 1 - len(u.partial.raw)) - pOff
	if g.d1 >= g.t1 || g.t2 >= len(line) || line[g.t1] != '"' || line[g.t2] != '"' {
		return Growth{}, false
	}
	return g, true
}

// followGrowth returns the growth of line, the update u coded with ops
// into entry, when the next update may repeat it with a new delta; ok is
// false otherwise.
func followGrowth(line []byte, u *update, ops []op, entry []byte) (g growth, ok bool) {
	// A step value as long as refMin may travel as a reference into the
	// partial message: the parse decides that, not this shortcut.
	for _, v := range u.step.kids {
		if len(v.raw) >= refMin {
			return growth{}, false
		}
	}
	if g.Growth, ok = lineGrowth(line, u, ops); !ok {
		return growth{}, false
	}
	// The long entry writes the step as the line holds it, up to its
	// partial: the delta's body sits as far into it.
	g.entry, g.e0 = entry, len(`{"u":`)+g.d0-len(linePrefix)
	n := g.d1 - g.d0
	if g.e0 < 1 || g.e0+n >= len(entry) || entry[g.e0-1] != '"' || entry[g.e0+n] != '"' ||
		!bytes.Equal(entry[g.e0:g.e0+n], line[g.d0:g.d1]) {
		return growth{}, false
	}
	return g, true
}

// Next reports whether line is g's line grown by a new delta, and returns
// that delta's body: a slice of line, not empty, that is a valid JSON
// string body (its escapes are whole, it has no control character and no
// quote but escaped ones; UTF-8 is not checked, as by jsonscan).
//
// A line Next accepts is valid JSON, as g's line is (a Growth comes from
// a parse: GrowthOf, followGrowth, or Grown of one): the only bytes that
// changed are three string bodies, each a valid one, either replaced (the
// delta's, between its quotes) or grown at its end, before its closing
// quote, by a valid one (a body ends after a whole escape, so the two
// read as one). Its members are g's line's, but for the values of those
// three strings.
func (g *Growth) Next(line []byte) (delta []byte, ok bool) {
	base := g.line
	if base == nil || len(line) <= g.d0 || !bytes.Equal(line[:g.d0], base[:g.d0]) {
		return nil, false
	}
	end, _ := jsonscan.SkipString(line, g.d0-1)
	if end < 0 {
		return nil, false
	}
	delta = line[g.d0 : end-1]
	// An empty delta changes no string: the parse codes (or reads) it.
	if len(delta) == 0 || len(line) != len(base)-(g.d1-g.d0)+3*len(delta) {
		return nil, false
	}
	i := end - 1
	for _, want := range [...][]byte{base[g.d1:g.t1], delta, base[g.t1:g.t2], delta, base[g.t2:]} {
		if !bytes.Equal(line[i:i+len(want)], want) {
			return nil, false
		}
		i += len(want)
	}
	return delta, true
}

// Grown returns the growth of line, which Next accepted with delta.
func (g *Growth) Grown(line, delta []byte) Growth {
	grow := len(delta) - (g.d1 - g.d0) // the step's delta, before both copies of the string
	return Growth{line: line, d0: g.d0, d1: g.d0 + len(delta), t1: g.t1 + grow + len(delta), t2: g.t2 + grow + 2*len(delta)}
}

// Delta returns the step's delta in g's line (g not zero), quotes included.
func (g *Growth) Delta() []byte { return g.line[g.d0-1 : g.d1+1] }

// next is Next for the encoder: a long delta may be a reference, which
// the parse codes.
func (g *growth) next(line []byte) (delta []byte, ok bool) {
	delta, ok = g.Next(line)
	return delta, ok && len(delta)+2 < refMin
}

// grown returns the growth of line, which next accepted with delta, and
// its coded forms: the long entry (the base's with the new delta) and the
// short one.
func (g *growth) grown(line, delta []byte) (next growth, long, short []byte) {
	n := g.d1 - g.d0
	long = make([]byte, 0, len(g.entry)-n+len(delta))
	long = append(append(append(long, g.entry[:g.e0]...), delta...), g.entry[g.e0+n:]...)
	short = shortEntry(delta, nil) // its one op, d, carries no value
	return growth{Growth: g.Grown(line, delta), entry: long, e0: g.e0}, long, short
}

// offsetIn returns where sub, a slice of b's own bytes, starts in b.
func offsetIn(b, sub []byte) (int, bool) {
	off := cap(b) - cap(sub)
	if len(sub) == 0 || off < 0 || off+len(sub) > len(b) || &b[off] != &sub[0] {
		return 0, false
	}
	return off, true
}
