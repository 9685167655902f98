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
	"unicode/utf8"

	"example.com/pifleet/internal/jsonscan"
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
	// The project's scanner validates the text in one pass; the builder
	// below then walks bytes known to be valid JSON, so it checks nothing.
	sc := jsonscan.Scanner{MaxDepth: MaxDepth}
	start, end, serr := sc.Check(data)
	if serr != nil {
		msg := serr.Reason
		if serr.Offset < len(data) {
			msg += ", found " + strconv.QuoteRune(rune(data[serr.Offset]))
		}
		return Value{}, false, &SyntaxError{Offset: serr.Offset, Msg: msg}
	}
	// Plain strings (no escapes, the vast majority) are cut out of one copy
	// of the input instead of being allocated one by one.
	b := builder{data: data, text: string(data), canonical: start == 0 && end == len(data)}
	v, _ = b.value(start)
	return v, b.canonical, nil
}

// builder turns valid JSON into a Value.
type builder struct {
	data []byte
	text string // the same bytes as data
	// canonical stays true while nothing seen would be written differently
	// by Append.
	canonical bool
}

func (b *builder) space(i int) int {
	j := jsonscan.SkipSpace(b.data, i)
	if j != i {
		b.canonical = false
	}
	return j
}

// value builds the value at b.data[i] and returns it and the index after it.
func (b *builder) value(i int) (Value, int) {
	switch b.data[i] {
	case '{':
		return b.object(i)
	case '[':
		return b.array(i)
	case '"':
		s, end := b.str(i)
		return Value{Kind: String, Str: s}, end
	case 't':
		return Value{Kind: Bool, Bool: true}, i + len("true")
	case 'f':
		return Value{Kind: Bool}, i + len("false")
	case 'n':
		return Value{Kind: Null}, i + len("null")
	}
	return b.number(i)
}

func (b *builder) array(i int) (Value, int) {
	v := Value{Kind: Array, Items: []Value{}}
	if i = b.space(i + 1); b.data[i] == ']' {
		return v, i + 1
	}
	for {
		var item Value
		item, i = b.value(i)
		v.Items = append(v.Items, item)
		if i = b.space(i); b.data[i] == ']' {
			return v, i + 1
		}
		i = b.space(i + 1) // after ','
	}
}

func (b *builder) object(i int) (Value, int) {
	// Room for three members: the shape of a manifest's file entries.
	v := Value{Kind: Object, Members: make([]Member, 0, 3)}
	if i = b.space(i + 1); b.data[i] == '}' {
		return v, i + 1
	}
	indexKeys := false
	var index map[string]int // built once an object is large, so duplicates cost O(1)
	for {
		var key string
		key, i = b.str(i)
		i = b.space(b.space(i) + 1) // after ':'
		var val Value
		val, i = b.value(i)
		// JavaScript: a repeated key keeps its place and takes the new value.
		at := -1
		if index != nil {
			if j, ok := index[key]; ok {
				at = j
			}
		} else {
			at = slices.IndexFunc(v.Members, func(m Member) bool { return m.Key == key })
		}
		if at >= 0 {
			v.Members[at].Value = val
			b.canonical = false
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
		if i = b.space(i); b.data[i] == ',' {
			i = b.space(i + 1)
			continue
		}
		// '}'
		if indexKeys {
			b.canonical = false
			orderLikeJS(v.Members)
		}
		return v, i + 1
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

// str returns the string at b.data[i] and the index after it.
func (b *builder) str(i int) (string, int) {
	// Most strings are plain ASCII: find their closing quote eight bytes
	// at a time, in the same pass that checks they need no decoding.
	j := i + 1 + plainASCIIPrefix(b.text[i+1:])
	for j < len(b.text) && b.text[j] >= 0x20 && b.text[j] < utf8.RuneSelf && b.text[j] != '"' && b.text[j] != '\\' {
		j++
	}
	if b.text[j] == '"' {
		return b.text[i+1 : j], j + 1
	}
	end, esc := jsonscan.SkipString(b.data, i)
	b.canonical = false // escapes and non-ASCII text: re-encode to be sure
	return jsonscan.Unquote(b.data[i:end], esc), end
}

// number returns the number at b.data[i] and the index after it. Like
// JavaScript, a number too large for a float64 becomes ±Inf rather than an
// error.
func (b *builder) number(i int) (Value, int) {
	end := jsonscan.SkipNumber(b.data, i)
	tok := b.data[i:end]
	f, _ := jsonscan.ParseNumber(tok)
	if len(tok) > 15 || string(tok) == "-0" || !isInteger(tok) {
		b.canonical = false // not an integer Append writes the same way
	}
	return Value{Kind: Number, Num: f}, end
}

// isInteger reports whether the valid number token tok has neither a
// fraction nor an exponent.
func isInteger(tok []byte) bool {
	for _, c := range tok {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}
