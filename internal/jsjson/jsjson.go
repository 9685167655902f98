// Package jsjson reads and writes JSON the way JavaScript's JSON.parse and
// JSON.stringify do, for the documents pifleet shares with the TypeScript
// pi-fleet (bundle manifests, cache pointers, bundle.json).
//
// What differs from encoding/json, and why it matters here:
//
//   - keys are matched exactly (encoding/json also accepts "Path" for
//     "path"), so a document means the same thing to both peers;
//   - a duplicate key keeps its first position and takes its last value, and
//     keys that are array indices ("0", "17") come first in ascending order,
//     as in every JavaScript object; re-encoding keeps that order;
//   - strings are written without HTML escapes and with U+2028/U+2029 raw,
//     numbers in ECMAScript's shortest form, non-finite numbers as null;
//   - it is several times faster on manifests (long arrays of small objects),
//     which keeps a warm bundle sync in the low milliseconds.
//
// Like encoding/json, and unlike JavaScript, a string cannot carry a lone
// UTF-16 surrogate or invalid UTF-8: both become U+FFFD.
package jsjson

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the type of a JSON value.
type Kind uint8

// The JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// String names the kind as JavaScript's typeof-style descriptions do in
// error messages ("string", "object", "array" …).
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return "invalid"
}

// Value is one parsed JSON value. Only the field of its Kind is set: Bool
// (Bool), Num (Number), Str (String), Items (Array), Members (Object).
type Value struct {
	Kind    Kind
	Bool    bool
	Num     float64
	Str     string
	Items   []Value
	Members []Member
}

// Member is one property of an object.
type Member struct {
	Key   string
	Value Value
}

// Get returns the value of key in an object.
func (v *Value) Get(key string) (*Value, bool) {
	for i := range v.Members {
		if v.Members[i].Key == key {
			return &v.Members[i].Value, true
		}
	}
	return nil, false
}

// MaxDepth bounds the nesting of arrays and objects, so that hostile input
// cannot exhaust the stack.
const MaxDepth = 512

// SyntaxError reports text that is not one JSON value.
type SyntaxError struct {
	Offset int // byte offset of the problem
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Parse parses data, which must hold exactly one JSON value with optional
// surrounding whitespace.
func Parse(data []byte) (Value, error) {
	v, _, err := ParseCanonical(data)
	return v, err
}

// ParseCanonical is Parse that also reports whether data is exactly what
// Append writes for the value: compact, keys unique and in JavaScript
// order, strings without escapes, integers only. A caller that needs the
// compact form of a document that usually is compact already (a manifest
// served by a registry) can then keep data instead of re-encoding it. A
// false canonical only means "re-encode to be sure".
func ParseCanonical(data []byte) (v Value, canonical bool, err error) {
	// Plain strings (no escapes, the vast majority) are cut out of one copy
	// of the input instead of being allocated one by one.
	p := parser{data: data, text: string(data), canonical: true}
	p.skipSpace()
	v, err = p.value(0)
	if err != nil {
		return Value{}, false, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return Value{}, false, p.errorf("unexpected %s after the value", p.describe())
	}
	return v, p.canonical, nil
}

type parser struct {
	data []byte
	text string // the same bytes as data
	pos  int
	// canonical stays true while nothing seen would be written differently
	// by Append.
	canonical bool
}

func (p *parser) errorf(format string, args ...any) error {
	return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) describe() string {
	if p.pos >= len(p.data) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(p.data[p.pos]))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
			p.canonical = false
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if p.pos >= len(p.data) {
		return Value{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, Str: s}, err
	case c == '-' || c >= '0' && c <= '9':
		n, err := p.number()
		return Value{Kind: Number, Num: n}, err
	case p.literal("true"):
		return Value{Kind: Bool, Bool: true}, nil
	case p.literal("false"):
		return Value{Kind: Bool}, nil
	case p.literal("null"):
		return Value{Kind: Null}, nil
	}
	return Value{}, p.errorf("unexpected %s", p.describe())
}

func (p *parser) literal(word string) bool {
	if len(p.data)-p.pos >= len(word) && string(p.data[p.pos:p.pos+len(word)]) == word {
		p.pos += len(word)
		return true
	}
	return false
}

func (p *parser) array(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.errorf("nested deeper than %d", MaxDepth)
	}
	p.pos++ // [
	v := Value{Kind: Array, Items: []Value{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		item, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		v.Items = append(v.Items, item)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return Value{}, p.errorf("expected ',' or ']' in array, found %s", p.describe())
		}
	}
}

func (p *parser) object(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.errorf("nested deeper than %d", MaxDepth)
	}
	p.pos++ // {
	// Room for three members: the shape of a manifest's file entries.
	v := Value{Kind: Object, Members: make([]Member, 0, 3)}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	indexKeys := false
	var index map[string]int // built once an object is large, so duplicates cost O(1)
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.errorf("expected a string key, found %s", p.describe())
		}
		key, err := p.key()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.errorf("expected ':' after key %q, found %s", key, p.describe())
		}
		p.pos++
		p.skipSpace()
		val, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		// JavaScript: a repeated key keeps its place and takes the new value.
		i := -1
		if index != nil {
			if j, ok := index[key]; ok {
				i = j
			}
		} else {
			i = slices.IndexFunc(v.Members, func(m Member) bool { return m.Key == key })
		}
		if i >= 0 {
			v.Members[i].Value = val
			p.canonical = false
		} else {
			v.Members = append(v.Members, Member{Key: key, Value: val})
			indexKeys = indexKeys || isArrayIndex(key)
			if index != nil {
				index[key] = len(v.Members) - 1
			} else if len(v.Members) > 16 {
				index = make(map[string]int, 2*len(v.Members))
				for j, m := range v.Members {
					index[m.Key] = j
				}
			}
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			if indexKeys {
				p.canonical = false
				orderLikeJS(v.Members)
			}
			return v, nil
		default:
			return Value{}, p.errorf("expected ',' or '}' in object, found %s", p.describe())
		}
	}
}

// isArrayIndex reports whether key is a canonical array index (0 to
// 2³²−2), the keys JavaScript orders first, numerically.
func isArrayIndex(key string) bool {
	if key == "" || len(key) > 10 || key[0] == '0' && len(key) > 1 {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < '0' || key[i] > '9' {
			return false
		}
	}
	n, err := strconv.ParseUint(key, 10, 64)
	return err == nil && n < math.MaxUint32
}

// orderLikeJS moves array-index keys first, in ascending numeric order,
// keeping the insertion order of the other keys.
func orderLikeJS(ms []Member) {
	slices.SortStableFunc(ms, func(a, b Member) int {
		ai, bi := isArrayIndex(a.Key), isArrayIndex(b.Key)
		switch {
		case ai && bi:
			an, _ := strconv.ParseUint(a.Key, 10, 64)
			bn, _ := strconv.ParseUint(b.Key, 10, 64)
			return cmpUint(an, bn)
		case ai:
			return -1
		case bi:
			return 1
		}
		return 0
	})
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// key parses an object key.
func (p *parser) key() (string, error) { return p.str() }

// str parses a string starting at the opening quote.
func (p *parser) str() (string, error) {
	start := p.pos + 1
	i := start
	for ; i < len(p.data); i++ {
		c := p.data[i]
		if c == '"' {
			p.pos = i + 1
			return p.text[start:i], nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	p.canonical = false // escapes and non-ASCII text: re-encode to be sure
	buf := make([]byte, 0, i-start+16)
	buf = append(buf, p.data[start:i]...)
	for i < len(p.data) {
		c := p.data[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return string(buf), nil
		case c < 0x20:
			p.pos = i
			return "", p.errorf("control character %#02x in string", c)
		case c == '\\':
			if i+1 >= len(p.data) {
				p.pos = i
				return "", p.errorf("unterminated escape")
			}
			switch e := p.data[i+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
				i += 2
			case 'b':
				buf = append(buf, '\b')
				i += 2
			case 'f':
				buf = append(buf, '\f')
				i += 2
			case 'n':
				buf = append(buf, '\n')
				i += 2
			case 'r':
				buf = append(buf, '\r')
				i += 2
			case 't':
				buf = append(buf, '\t')
				i += 2
			case 'u':
				r, ok := hex4(p.data, i+2)
				if !ok {
					p.pos = i
					return "", p.errorf(`bad \u escape`)
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok2 := rune(-1), false
					if i+1 < len(p.data) && p.data[i] == '\\' && p.data[i+1] == 'u' {
						r2, ok2 = hex4(p.data, i+2)
					}
					if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				buf = utf8.AppendRune(buf, r)
			default:
				p.pos = i
				return "", p.errorf("bad escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(p.data[i:])
			if r == utf8.RuneError && size == 1 {
				buf = utf8.AppendRune(buf, utf8.RuneError)
			} else {
				buf = append(buf, p.data[i:i+size]...)
			}
			i += size
		}
	}
	p.pos = len(p.data)
	return "", p.errorf("unterminated string")
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number parses a JSON number. Like JavaScript, a number too large for a
// float64 becomes ±Inf rather than an error.
func (p *parser) number() (float64, error) {
	start := p.pos
	i := start
	if i < len(p.data) && p.data[i] == '-' {
		i++
	}
	switch {
	case i < len(p.data) && p.data[i] == '0':
		i++
	case i < len(p.data) && p.data[i] >= '1' && p.data[i] <= '9':
		for i < len(p.data) && p.data[i] >= '0' && p.data[i] <= '9' {
			i++
		}
	default:
		p.pos = i
		return 0, p.errorf("bad number")
	}
	integer := true
	if i < len(p.data) && p.data[i] == '.' {
		integer = false
		i++
		d := i
		for i < len(p.data) && p.data[i] >= '0' && p.data[i] <= '9' {
			i++
		}
		if i == d {
			p.pos = i
			return 0, p.errorf("bad number: no digits after '.'")
		}
	}
	if i < len(p.data) && (p.data[i] == 'e' || p.data[i] == 'E') {
		integer = false
		i++
		if i < len(p.data) && (p.data[i] == '+' || p.data[i] == '-') {
			i++
		}
		d := i
		for i < len(p.data) && p.data[i] >= '0' && p.data[i] <= '9' {
			i++
		}
		if i == d {
			p.pos = i
			return 0, p.errorf("bad number: no digits in exponent")
		}
	}
	p.pos = i
	text := p.data[start:i]
	if integer && len(text) <= 15 {
		// Fast path: exact in a float64, no allocation.
		neg := text[0] == '-'
		if neg {
			text = text[1:]
		}
		var n int64
		for _, c := range text {
			n = n*10 + int64(c-'0')
		}
		f := float64(n)
		if neg {
			f = -f
			if n == 0 {
				p.canonical = false // -0 is written 0
			}
		}
		return f, nil
	}
	p.canonical = false
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil && !isRange(err) {
		return 0, p.errorf("bad number %q", text)
	}
	return f, nil
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
