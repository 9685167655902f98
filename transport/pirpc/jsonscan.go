package pirpc

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"example.com/pifleet/internal/jsjson"
)

// A one-pass JSON validator and splitter for pi's records. encoding/json
// validates a whole line in a first pass and decodes it in a second, both
// byte by byte through a state machine; pi's lines are mostly messages the
// agent only forwards, so ParseRecord validates them here in one tight
// pass, keeps the top-level members as spans of the line, and decodes only
// the few it needs. Anything this scanner is unsure of makes ParseRecord
// fall back to encoding/json, so the results are encoding/json's.

// maxScanDepth bounds nesting; deeper lines go to encoding/json (which
// allows 10,000 levels), so the limit changes nothing but the path taken.
const maxScanDepth = 512

// object validates that the scanner's bytes are exactly one JSON object
// (surrounded by optional whitespace) and calls member for each of its
// top-level members in order, with the key's raw bytes (without quotes;
// escapes are not decoded, and keyEscaped says whether there were any)
// and the value's span. It returns false when the bytes are not valid
// JSON, are nested deeper than maxScanDepth, or when member returned
// false. A trusted scanner skips values without validating them again.
func (s scanner) object(member func(key []byte, keyEscaped bool, value []byte) bool) bool {
	b := s.b
	s.space()
	if !s.next('{') {
		return false
	}
	s.space()
	if !s.next('}') {
		for {
			s.space()
			start := s.i
			escaped, ok := s.str()
			if !ok {
				return false
			}
			key := b[start+1 : s.i-1]
			s.space()
			if !s.next(':') {
				return false
			}
			s.space()
			vstart := s.i
			if !s.value(1) {
				return false
			}
			if !member(key, escaped, b[vstart:s.i]) {
				return false
			}
			s.space()
			if s.next(',') {
				continue
			}
			if s.next('}') {
				break
			}
			return false
		}
	}
	s.space()
	return s.i == len(b)
}

type scanner struct {
	b []byte
	i int
	// trusted says b was validated already (a member of a line scanned
	// before): values are skipped by their delimiters alone.
	trusted bool
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) next(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// value skips one value starting at s.i (no leading whitespace).
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	if s.trusted {
		// Trusted bytes need no checks, but an empty span (a delimiter
		// where a value belongs) would leave decoders nothing to look at.
		start := s.i
		s.skip()
		return s.i > start
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{':
		if depth > maxScanDepth {
			return false
		}
		s.i++
		s.space()
		if s.next('}') {
			return true
		}
		for {
			s.space()
			if _, ok := s.str(); !ok {
				return false
			}
			s.space()
			if !s.next(':') {
				return false
			}
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.next(',') {
				continue
			}
			return s.next('}')
		}
	case c == '[':
		if depth > maxScanDepth {
			return false
		}
		s.i++
		s.space()
		if s.next(']') {
			return true
		}
		for {
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.next(',') {
				continue
			}
			return s.next(']')
		}
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

// skip skips a value of validated JSON.
func (s *scanner) skip() {
	b, i := s.b, s.i
	switch b[i] {
	case '"':
		i = stringEnd(b, i)
	case '{', '[':
		depth := 0
	scan:
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					i++
					break scan
				}
			}
			i++
		}
	default: // a number or a literal
		for i < len(b) && !delimiter[b[i]] {
			i++
		}
	}
	s.i = i
}

// stringEnd returns the index after the string of validated JSON that
// starts at b[i].
func stringEnd(b []byte, i int) int {
	i++
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		i += q
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// delimiter marks the bytes that end a number or literal.
var delimiter = func() (t [256]bool) {
	for _, c := range []byte(" \t\r\n,:]}") {
		t[c] = true
	}
	return t
}()

func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// str skips a string starting at its opening quote; escaped says whether
// it holds a backslash escape.
func (s *scanner) str() (escaped, ok bool) {
	if !s.next('"') {
		return false, false
	}
	b := s.b
	for i := s.i; i < len(b); {
		i = jsjson.PlainEnd(b, i) // eight bytes at a time, then the tail
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return false, false
				}
				i += 6
			default:
				return false, false
			}
		case c < 0x20:
			return false, false
		default:
			i++
		}
	}
	return false, false
}

// plainByte marks the bytes a string holds as they are: all but the
// quote, the backslash and control characters.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// number skips -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	b := s.b
	i := s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return true
}

// plainString returns the text of a string span that needs no decoding
// (no escapes, valid UTF-8), and false for any other span.
func plainString(span []byte) (string, bool) {
	if len(span) < 2 || span[0] != '"' {
		return "", false
	}
	body := span[1 : len(span)-1]
	ascii := true
	for _, c := range body {
		if c == '\\' {
			return "", false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii && !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// fieldSet names the JSON members of one struct for eachMember.
type fieldSet struct {
	exact  map[string]int  // name → index (< 64)
	folded map[string]bool // the names in lower case
}

func newFieldSet(names ...string) fieldSet {
	fs := fieldSet{exact: make(map[string]int, len(names)), folded: make(map[string]bool, len(names))}
	for i, n := range names {
		fs.exact[n] = i
		fs.folded[strings.ToLower(n)] = true
	}
	return fs
}

// foldsTo reports whether encoding/json could match key to one of the
// names by case folding (any non-ASCII key counts: Unicode folding maps a
// few letters to ASCII ones).
func (fs fieldSet) foldsTo(key []byte) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	var lower [32]byte
	if len(key) > len(lower) {
		return false // longer than every field name
	}
	for i, c := range key {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return fs.folded[string(lower[:len(key)])]
}

// eachMember calls set for each member of the object span (a member of
// a line validated already) that names a field of fs. It reports false
// when span is not an object, when a key is escaped, repeated or matches a
// field only by case folding (encoding/json's business), or when set
// returns false.
func eachMember(span []byte, fs fieldSet, set func(field int, value []byte) bool) bool {
	return len(span) > 0 && span[0] == '{' && members(scanner{b: span, trusted: true}, fs, set)
}

// eachLineMember is eachMember for a whole line, which it validates
// unless the caller says it is valid already.
func eachLineMember(line []byte, valid bool, fs fieldSet, set func(field int, value []byte) bool) bool {
	return members(scanner{b: line, trusted: valid}, fs, set)
}

func members(s scanner, fs fieldSet, set func(field int, value []byte) bool) bool {
	var seen uint64
	return s.object(func(key []byte, escaped bool, value []byte) bool {
		if escaped {
			return false
		}
		f, ok := fs.exact[string(key)]
		if !ok {
			return !fs.foldsTo(key)
		}
		if seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		return set(f, value)
	})
}
