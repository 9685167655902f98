package streamdelta

import (
	"bytes"
	"errors"
	"fmt"

	"example.com/pifleet/internal/jsonscan"
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
	raw  []byte
	keys [][]byte // an object's keys, quotes included
	kids []*node
	// open: a string leaf whose raw was allocated here and lacks its
	// closing quote (written by appendTo), so that appending to it in
	// place never writes over bytes an earlier version of the string
	// still reads (rebuilt events keep earlier versions: Line).
	open bool
}

// errSyntax is wrapped by every parse error.
var errSyntax = errors.New("not compact JSON")

// parser builds a tree from compact JSON. The tokens are jsonscan's; the
// structure (no whitespace anywhere, so that writing the tree back gives
// the same bytes) is checked here.
type parser struct {
	b     []byte
	i     int
	depth int
	arena *arena
}

// arena hands out a tree's nodes and its containers' member lists from
// blocks, a few allocations per line instead of a few per member: a
// parsed partial message is a few dozen nodes, parsed at every update.
// Blocks are never reused: a tree keeps what it was given for as long as
// anything refers to it, as with separate allocations.
type arena struct {
	nodes []node
	ptrs  []*node
	keys  [][]byte
	// The members of the containers being read, innermost last.
	kidStack []*node
	keyStack [][]byte
}

func (a *arena) node(n node) *node {
	if len(a.nodes) == cap(a.nodes) {
		a.nodes = make([]node, 0, blockSize(cap(a.nodes)))
	}
	a.nodes = append(a.nodes, n)
	return &a.nodes[len(a.nodes)-1]
}

// reuse makes a hand out its last blocks' memory again, cleared (so that
// it keeps no line alive): only when no tree from a is read any more.
func (a *arena) reuse() {
	clear(a.nodes)
	clear(a.ptrs)
	clear(a.keys)
	a.nodes, a.ptrs, a.keys = a.nodes[:0], a.ptrs[:0], a.keys[:0]
}

// kids and keyList move a container's members, the stack's from from
// on, into a block.
func (a *arena) kids(from int) []*node     { return carve(&a.ptrs, &a.kidStack, from) }
func (a *arena) keyList(from int) [][]byte { return carve(&a.keys, &a.keyStack, from) }

// carve moves (*stack)[from:] to the end of *block, a new block when it
// is full, and returns the copy with its capacity clipped, so that
// appending to it copies instead of writing over a neighbour's.
func carve[T any](block, stack *[]T, from int) []T {
	src := (*stack)[from:]
	out := blockCopy(block, src)
	clear(src) // the stack lets go of what it held
	*stack = (*stack)[:from]
	return out
}

// blockCopy appends a copy of src to *block, a new block when it is full,
// and returns the copy with its capacity clipped.
func blockCopy[T any](block *[]T, src []T) []T {
	if len(*block)+len(src) > cap(*block) {
		*block = make([]T, 0, max(blockSize(cap(*block)), len(src)))
	}
	start := len(*block)
	*block = append(*block, src...)
	return (*block)[start:len(*block):len(*block)]
}

// blockSize is the size of the block after one of size n: small for the
// first, so that a short line costs little, larger as a tree grows.
func blockSize(n int) int { return min(max(2*n, 16), 256) }

// parseTree reads b, which must be exactly one JSON value without
// insignificant whitespace (what JSON.stringify writes), into a tree
// whose nodes come from a (nil: a fresh arena).
func parseTree(b []byte, a *arena) (*node, error) {
	if a == nil {
		a = new(arena)
	}
	p := &parser{b: b, arena: a}
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
	sc := jsonscan.Scanner{MaxDepth: maxDepth}
	end := sc.SkipValue(b, i)
	if end < 0 {
		at, why := sc.Err()
		return 0, fmt.Errorf("%w: offset %d: %s", errSyntax, at, why)
	}
	return end, nil
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", errSyntax, p.i, fmt.Sprintf(format, args...))
}

func (p *parser) value() (*node, error) {
	if p.i >= len(p.b) {
		return nil, p.errorf("unexpected end")
	}
	start, end := p.i, -1
	switch c := p.b[p.i]; {
	case c == '{' || c == '[':
		return p.container(c)
	case c == '"':
		end, _ = jsonscan.SkipString(p.b, p.i)
	case c == '-' || c >= '0' && c <= '9':
		end = jsonscan.SkipNumber(p.b, p.i)
	case c == 't':
		end = p.literal("true")
	case c == 'f':
		end = p.literal("false")
	case c == 'n':
		end = p.literal("null")
	}
	if end < 0 {
		return nil, p.errorf("not a JSON value")
	}
	p.i = end
	return p.arena.node(node{raw: p.b[start:end]}), nil
}

func (p *parser) literal(word string) int {
	if !bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		return -1
	}
	return p.i + len(word)
}

// container reads an object or an array: members or elements separated by
// single commas, nothing in between.
func (p *parser) container(open byte) (*node, error) {
	if p.depth++; p.depth > maxDepth {
		return nil, p.errorf("nested deeper than %d", maxDepth)
	}
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	start := p.i
	kidsFrom, keysFrom := len(p.arena.kidStack), len(p.arena.keyStack)
	p.i++
	for first := true; ; first = false {
		if p.i < len(p.b) && p.b[p.i] == closing && first {
			break
		}
		if open == '{' {
			ks := p.i
			end := -1
			if p.i < len(p.b) && p.b[p.i] == '"' {
				end, _ = jsonscan.SkipString(p.b, p.i)
			}
			if end < 0 || end >= len(p.b) || p.b[end] != ':' {
				return nil, p.errorf("want a key and ':'")
			}
			p.arena.keyStack = append(p.arena.keyStack, p.b[ks:end])
			p.i = end + 1
		}
		kid, err := p.value()
		if err != nil {
			return nil, err
		}
		p.arena.kidStack = append(p.arena.kidStack, kid)
		if p.i < len(p.b) && p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.i >= len(p.b) || p.b[p.i] != closing {
			return nil, p.errorf("want ',' or %q", closing)
		}
		break
	}
	p.i++
	p.depth--
	n := p.arena.node(node{kind: open, raw: p.b[start:p.i], kids: p.arena.kids(kidsFrom)})
	if open == '{' {
		n.keys = p.arena.keyList(keysFrom)
	}
	return n, nil
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
		dst = append(dst, n.raw...)
		if n.open {
			dst = append(dst, '"')
		}
		return dst
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
		if n.open {
			return len(n.raw) + 1
		}
		return len(n.raw)
	}
}

// isString reports whether n is a string leaf.
func (n *node) isString() bool {
	return n.kind == 0 && len(n.raw) >= 1 && n.raw[0] == '"' && (n.open || len(n.raw) >= 2)
}

// appendString appends suffix (the escaped body of a JSON string) to the
// string leaf n, in place once n is open: amortised O(len(suffix)). Only
// bytes past the end of n.raw are written, so a copy of n made before
// (an earlier version) still reads what it read.
func (n *node) appendString(suffix []byte) {
	if !n.open {
		body := n.raw[:len(n.raw)-1]
		grown := make([]byte, len(body), 2*(len(body)+len(suffix))+1)
		copy(grown, body)
		n.raw, n.open = grown, true
	}
	n.raw = append(n.raw, suffix...)
}
