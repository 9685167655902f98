package streamdelta

import (
	"bytes"
	"errors"
	"fmt"
)

// maxDepth bounds the nesting the parser follows (input is untrusted).
const maxDepth = 64

// node is one JSON value of an event, split into members where the codec
// walks into it. Leaves (strings, numbers, true, false, null) keep their
// bytes verbatim, so writing a tree back gives the bytes it was read from.
type node struct {
	kind byte // '{', '[', or 0 for a leaf
	// raw is a leaf's bytes. For a container just parsed it is the span it
	// was read from (the encoder compares spans); a container changed by an
	// op has none.
	raw   []byte
	keys  [][]byte // an object's keys, quotes included
	kids  []*node
	owned bool // raw was allocated here, so appending to it in place is safe
}

// errSyntax is wrapped by every parse error.
var errSyntax = errors.New("not compact JSON")

type parser struct {
	b       []byte
	i       int
	depth   int
	build   bool // build a tree (compact JSON only) rather than only skip
	spaceOK bool
}

// parseTree reads b, which must be exactly one JSON value without
// insignificant whitespace (what JSON.stringify writes), into a tree.
func parseTree(b []byte) (*node, error) {
	p := &parser{b: b, build: true}
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	if p.i != len(b) {
		return nil, p.errorf("trailing bytes")
	}
	return n, nil
}

// skipValue returns the end of the JSON value that starts at b[i]
// (whitespace allowed), checking its syntax without building anything.
func skipValue(b []byte, i int) (int, error) {
	p := &parser{b: b, i: i, spaceOK: true}
	if _, err := p.value(); err != nil {
		return 0, err
	}
	return p.i, nil
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", errSyntax, p.i, fmt.Sprintf(format, args...))
}

func (p *parser) space() {
	if !p.spaceOK {
		return
	}
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value() (*node, error) {
	p.space()
	if p.i >= len(p.b) {
		return nil, p.errorf("unexpected end")
	}
	start := p.i
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(start)
	case c == '[':
		return p.array(start)
	case c == '"':
		if err := p.str(); err != nil {
			return nil, err
		}
	case c == '-' || c >= '0' && c <= '9':
		if err := p.number(); err != nil {
			return nil, err
		}
	case c == 't':
		if err := p.literal("true"); err != nil {
			return nil, err
		}
	case c == 'f':
		if err := p.literal("false"); err != nil {
			return nil, err
		}
	case c == 'n':
		if err := p.literal("null"); err != nil {
			return nil, err
		}
	default:
		return nil, p.errorf("unexpected %q", c)
	}
	if !p.build {
		return nil, nil
	}
	return &node{raw: p.b[start:p.i]}, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf("nested deeper than %d", maxDepth)
	}
	return nil
}

func (p *parser) object(start int) (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // {
	var n *node
	if p.build {
		n = &node{kind: '{'}
	}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		p.depth--
		if n != nil {
			n.raw = p.b[start:p.i]
		}
		return n, nil
	}
	for {
		p.space()
		ks := p.i
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.errorf("want a key")
		}
		if err := p.str(); err != nil {
			return nil, err
		}
		key := p.b[ks:p.i]
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.errorf("want ':'")
		}
		p.i++
		kid, err := p.value()
		if err != nil {
			return nil, err
		}
		if n != nil {
			n.keys = append(n.keys, key)
			n.kids = append(n.kids, kid)
		}
		p.space()
		if p.i >= len(p.b) {
			return nil, p.errorf("unexpected end in an object")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			p.depth--
			if n != nil {
				n.raw = p.b[start:p.i]
			}
			return n, nil
		default:
			return nil, p.errorf("want ',' or '}'")
		}
	}
}

func (p *parser) array(start int) (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.i++ // [
	var n *node
	if p.build {
		n = &node{kind: '['}
	}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		p.depth--
		if n != nil {
			n.raw = p.b[start:p.i]
		}
		return n, nil
	}
	for {
		kid, err := p.value()
		if err != nil {
			return nil, err
		}
		if n != nil {
			n.kids = append(n.kids, kid)
		}
		p.space()
		if p.i >= len(p.b) {
			return nil, p.errorf("unexpected end in an array")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			p.depth--
			if n != nil {
				n.raw = p.b[start:p.i]
			}
			return n, nil
		default:
			return nil, p.errorf("want ',' or ']'")
		}
	}
}

// str reads a string, escapes checked. Bytes at or above 0x80 pass as
// they are (the transport checked the frame's encoding).
func (p *parser) str() error {
	p.i++ // "
	for p.i < len(p.b) {
		// Most of a string is plain: jump to the next quote or backslash.
		j := bytes.IndexAny(p.b[p.i:], "\"\\")
		if j < 0 {
			break
		}
		for _, c := range p.b[p.i : p.i+j] {
			if c < 0x20 {
				return p.errorf("control character in a string")
			}
		}
		p.i += j
		if p.b[p.i] == '"' {
			p.i++
			return nil
		}
		p.i++ // backslash
		if p.i >= len(p.b) {
			break
		}
		switch p.b[p.i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			p.i++
		case 'u':
			if p.i+5 > len(p.b) || !isHex(p.b[p.i+1]) || !isHex(p.b[p.i+2]) || !isHex(p.b[p.i+3]) || !isHex(p.b[p.i+4]) {
				return p.errorf("bad \\u escape")
			}
			p.i += 5
		default:
			return p.errorf("bad escape")
		}
	}
	return p.errorf("unterminated string")
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func (p *parser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

func (p *parser) number() error {
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.digits() == 0:
		return p.errorf("bad number")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return p.errorf("bad number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return p.errorf("bad number")
		}
	}
	return nil
}

func (p *parser) literal(word string) error {
	if !bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		return p.errorf("bad literal")
	}
	p.i += len(word)
	return nil
}

// appendTo writes n as compact JSON.
func (n *node) appendTo(dst []byte) []byte {
	switch n.kind {
	case '{':
		dst = append(dst, '{')
		for i, k := range n.keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, k...)
			dst = append(dst, ':')
			dst = n.kids[i].appendTo(dst)
		}
		return append(dst, '}')
	case '[':
		dst = append(dst, '[')
		for i, k := range n.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = k.appendTo(dst)
		}
		return append(dst, ']')
	default:
		return append(dst, n.raw...)
	}
}

// size is len(n.appendTo(nil)), without writing.
func (n *node) size() int {
	switch n.kind {
	case '{':
		s := 2 + max(len(n.keys)-1, 0)
		for i, k := range n.keys {
			s += len(k) + 1 + n.kids[i].size()
		}
		return s
	case '[':
		s := 2 + max(len(n.kids)-1, 0)
		for _, k := range n.kids {
			s += k.size()
		}
		return s
	default:
		return len(n.raw)
	}
}

// isString reports whether n is a string leaf.
func (n *node) isString() bool { return n.kind == 0 && len(n.raw) >= 2 && n.raw[0] == '"' }

// appendString appends suffix (the escaped body of a JSON string) to the
// string leaf n, in place once n owns its bytes: amortised O(len(suffix)).
func (n *node) appendString(suffix []byte) {
	body := n.raw[:len(n.raw)-1]
	if !n.owned {
		grown := make([]byte, len(body), 2*(len(body)+len(suffix))+1)
		copy(grown, body)
		body, n.owned = grown, true
	}
	body = append(body, suffix...)
	n.raw = append(body, '"')
}
