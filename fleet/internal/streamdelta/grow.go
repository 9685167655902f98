package streamdelta

import (
	"bytes"

	"example.com/pifleet/internal/jsonscan"
)

// growth is what the encoder knows of its base line when that line was
// coded as the one before it with the step's delta appended to one
// string of the partial message: the usual update, one more chunk of
// text. The next update of that kind is, byte for byte, the base with a
// new delta in three places: the step's delta, and the end of that string
// in both copies of the partial message. Telling whether a line is that
// takes a comparison at memory speed; parsing it, as Encode otherwise
// does, builds a tree of every member of a message that grows with the
// answer.
//
// The coded forms come out byte for byte as a parse would code them:
// the short entry is the delta alone, and the long one is the base's with
// the delta replaced (TestGrowthCodesAsTheParse and FuzzGrowthCodesAsTheParse
// compare the two paths).
type growth struct {
	line   []byte // the base's line; nil when there is no growth to follow
	d0, d1 int    // the body of the step's delta in line
	t1, t2 int    // the closing quotes of the string that grows, in the partial and in message
	entry  []byte // the base's long entry ({"u":step,"o":[op]})
	e0     int    // where the delta's body starts in entry (it ends at e0+d1-d0)
}

// followGrowth returns the growth of line, the update u coded with ops
// into entry, when the next update may repeat it with a new delta; ok is
// false otherwise.
func followGrowth(line []byte, u *update, ops []op, entry []byte) (g growth, ok bool) {
	delta := u.delta()
	if len(ops) != 1 || ops[0].kind != opDelta || delta == nil {
		return growth{}, false
	}
	// A step value as long as refMin may travel as a reference into the
	// partial message: the parse decides that, not this shortcut.
	for _, v := range u.step.kids {
		if len(v.raw) >= refMin {
			return growth{}, false
		}
	}
	d0, ok := offsetIn(line, delta) // op d appends a delta: it is not empty
	if !ok {
		return growth{}, false
	}
	g = growth{line: line, d0: d0, d1: d0 + len(delta)}
	s := u.partial
	for _, i := range ops[0].path {
		if s.kind == 0 || i >= len(s.kids) {
			return growth{}, false
		}
		s = s.kids[i]
	}
	sOff, ok1 := offsetIn(line, s.raw)
	pOff, ok2 := offsetIn(line, u.partial.raw)
	if !ok1 || !ok2 || !s.isString() || s.open {
		return growth{}, false
	}
	// message is the line's last member: the partial again, then '}'.
	g.t1 = sOff + len(s.raw) - 1
	g.t2 = g.t1 + (len(line) - 1 - len(u.partial.raw)) - pOff
	// The long entry writes the step as the line holds it, up to its
	// partial: the delta's body sits as far into it.
	g.entry, g.e0 = entry, len(`{"u":`)+g.d0-len(linePrefix)
	n := g.d1 - g.d0
	if g.d1 >= g.t1 || g.t2 >= len(line) || line[g.t1] != '"' || line[g.t2] != '"' ||
		g.e0 < 1 || g.e0+n >= len(entry) || entry[g.e0-1] != '"' || entry[g.e0+n] != '"' ||
		!bytes.Equal(entry[g.e0:g.e0+n], line[g.d0:g.d1]) {
		return growth{}, false
	}
	return g, true
}

// next reports whether line is g's line grown by a new delta, and returns
// that delta's body.
func (g *growth) next(line []byte) (delta []byte, ok bool) {
	base := g.line
	if len(line) <= g.d0 || !bytes.Equal(line[:g.d0], base[:g.d0]) {
		return nil, false
	}
	end, _ := jsonscan.SkipString(line, g.d0-1)
	if end < 0 {
		return nil, false
	}
	delta = line[g.d0 : end-1]
	// An empty delta changes no string, and a long one may be a
	// reference: the parse codes those.
	if len(delta) == 0 || len(delta)+2 >= refMin || len(line) != len(base)-(g.d1-g.d0)+3*len(delta) {
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

// grown returns the growth of line, which next accepted with delta, and
// its coded forms: the long entry (the base's with the new delta) and the
// short one.
func (g *growth) grown(line, delta []byte) (next growth, long, short []byte) {
	n := g.d1 - g.d0
	long = make([]byte, 0, len(g.entry)-n+len(delta))
	long = append(append(append(long, g.entry[:g.e0]...), delta...), g.entry[g.e0+n:]...)
	short = shortEntry(delta, nil) // its one op, d, carries no value
	grow := len(delta) - n         // the step's delta, before both copies of the string
	next = growth{line: line, d0: g.d0, d1: g.d0 + len(delta), entry: long, e0: g.e0}
	next.t1 = g.t1 + grow + len(delta)
	next.t2 = g.t2 + grow + 2*len(delta)
	return next, long, short
}

// offsetIn returns where sub, a slice of b's own bytes, starts in b.
func offsetIn(b, sub []byte) (int, bool) {
	off := cap(b) - cap(sub)
	if len(sub) == 0 || off < 0 || off+len(sub) > len(b) || &b[off] != &sub[0] {
		return 0, false
	}
	return off, true
}
