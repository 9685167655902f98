package transport

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"example.com/pifleet/internal/jsjson"
)

// This file is a small validating JSON scanner over raw record bytes. It
// exists because encoding/json spends most of a frame's decode budget on
// reflection and a second validation pass; the codec needs only three
// things from the bytes: "is this valid JSON", "where are the top-level
// members", and "give me this string/number/raw value". The grammar is
// RFC 8259, which is what JavaScript's JSON.parse accepts.
//
// The scanner is iterative (an explicit stack of open containers), so a
// hostile record nested a million levels deep costs at most one byte of
// heap per level and never the goroutine stack.

// isSpace reports JSON whitespace: space, tab, LF and CR. Nothing else
// (no NBSP, no BOM) is whitespace to JSON.parse either.
var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// skipSpace returns the index of the first non-whitespace byte at or after
// b[i]. Compact JSON has no whitespace, so one comparison usually settles
// it: every whitespace byte is <= ' '.
func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace[b[i]] {
		i++
	}
	return i
}

const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// plainASCII reports whether the body of a valid JSON string is ASCII
// without escapes, so that its bytes are its value. (A valid body holds
// no quote or control byte but inside escapes.)
func plainASCII(s []byte) bool {
	i := 0
	for last := len(s) - 8; i <= last; i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		bs := x ^ (swarOnes * '\\')
		if ((bs-swarOnes)&^bs|x)&swarHigh != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] == '\\' || s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// skipString validates the string starting at b[i] == '"' and returns the
// index after its closing quote, or -1. esc reports whether the string
// contains a backslash escape. Bytes of 0x80 and above are not checked:
// invalid UTF-8 is accepted here (and replaced when the string is
// decoded), as by JSON.parse after the stream's UTF-8 decoding and by
// encoding/json.
func skipString(b []byte, i int) (end int, esc bool) {
	i++
	for {
		i = jsjson.PlainEnd(b, i)
		if i >= len(b) {
			return -1, esc
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc
		case c == '\\':
			esc = true
			if i = skipEscape(b, i); i < 0 {
				return -1, esc
			}
		case c < 0x20:
			return -1, esc
		default:
			i++ // a plain byte in the last seven of the record
		}
	}
}

// skipEscape validates the escape sequence at b[i] == '\\' and returns the
// index after it, or -1.
func skipEscape(b []byte, i int) int {
	if i+1 >= len(b) {
		return -1
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2
	case 'u':
		if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
			return -1
		}
		return i + 6
	}
	return -1
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !isHexDigit(c) {
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) rune {
	switch {
	case c <= '9':
		return rune(c - '0')
	case c >= 'a':
		return rune(c - 'a' + 10)
	default:
		return rune(c - 'A' + 10)
	}
}

// skipNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// starting at b[i] and returns the index after it, or -1.
func skipNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// skipDigits returns the index of the first byte at or after b[i] that is
// not an ASCII digit, looking at eight bytes at a time (timestamps have
// thirteen digits).
func skipDigits(b []byte, i int) int {
	for last := len(b) - 8; i <= last && i >= 0; i += 8 {
		if m := nonDigits(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// nonDigits flags, in the high nibble of each byte, the bytes of the
// little-endian word x that are not ASCII digits: a digit is 0x3? and stays
// 0x3? when 6 is added. A carry out of a byte (from 0xFA and above, not a
// digit) can only flag bytes above it, so the lowest flagged byte is
// exact.
func nonDigits(x uint64) uint64 {
	const high = swarOnes * 0xF0
	return (x&high ^ swarOnes*0x30) | ((x+swarOnes*0x06)&high ^ swarOnes*0x30)
}

func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanner holds the reusable memory of the scan: the part of the stack of
// open containers that does not fit in a register.
type scanner struct {
	// deep holds the kinds of the open containers beyond the innermost
	// 64, which skipContainer keeps in a register (see containers).
	deep []bool
}

// skipValue validates the JSON value starting at b[i] (leading whitespace
// allowed) and returns the index just after it, or -1 when the bytes are
// not one valid JSON value.
func (sc *scanner) skipValue(b []byte, i int) int {
	if i = skipSpace(b, i); i >= len(b) {
		return -1
	}
	return sc.valueEnd(b, i)
}

// containers is the stack of open containers: bit k of objs says whether
// the container k levels out from the innermost one is an object (1) or
// an array (0). Levels beyond 64 spill to scanner.deep, so the common case
// costs a shift and no memory.
type containers struct {
	objs  uint64
	depth int
}

func (c *containers) push(sc *scanner, obj bool) {
	if c.depth >= 64 {
		sc.deep = append(sc.deep, c.objs>>63 != 0)
	}
	c.objs <<= 1
	if obj {
		c.objs |= 1
	}
	c.depth++
}

func (c *containers) pop(sc *scanner) {
	c.objs >>= 1
	c.depth--
	if c.depth >= 64 {
		last := len(sc.deep) - 1
		if sc.deep[last] {
			c.objs |= 1 << 63
		}
		sc.deep = sc.deep[:last]
	}
}

// skipContainer is skipValue for objects and arrays.
//
// Skipping a nested value (event.event, rpc.command) is most of a frame's
// decoding time, so this is one flat loop with no calls on its common
// paths: the string scan and escape check are written out inline, each
// state tests for the byte compact JSON has there before considering
// whitespace, the stack of open containers lives in a register, and the
// gotos are the transitions of the grammar's states (value expected, key
// expected, value ended).
func (sc *scanner) skipContainer(b []byte, i int) int {
	var (
		open  containers
		isKey bool // the string being scanned is an object key
		c     byte
	)
	sc.deep = sc.deep[:0] // left over when the last value was invalid
value: // A value is expected at b[i].
	if i >= len(b) {
		return -1
	}
	c = b[i]
	if c == '"' {
		isKey = false
		goto str
	}
	switch c {
	case '{':
		if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
			i++
			goto ended
		}
		open.push(sc, true)
		goto key
	case '[':
		if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
			i++
			goto ended
		}
		open.push(sc, false)
		goto value
	case 't':
		i = skipLiteral(b, i, "true")
	case 'f':
		i = skipLiteral(b, i, "false")
	case 'n':
		i = skipLiteral(b, i, "null")
	case ' ', '\t', '\n', '\r':
		i = skipSpace(b, i+1)
		goto value
	default:
		i = skipNumber(b, i)
	}
	if i < 0 {
		return -1
	}
	goto ended

key: // An object key is expected at b[i] (whitespace already skipped).
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	isKey = true

str: // b[i] is the opening quote of a string.
	for i++; ; {
		i = jsjson.PlainEnd(b, i)
		if i >= len(b) {
			return -1
		}
		c = b[i]
		if c == '"' {
			i++
			break
		}
		switch {
		case c == '\\': // skipEscape, written out: this loop makes no calls
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			i++ // a plain byte in the last seven of the record
		}
	}
	if isKey {
		if i < len(b) && b[i] == ':' {
			i++
			goto value
		}
		if i = skipSpace(b, i); i < len(b) && b[i] == ':' {
			i = skipSpace(b, i+1)
			goto value
		}
		return -1
	}

ended: // A value ended just before b[i]: close containers or go on.
	if open.depth == 0 {
		return i
	}
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case ',':
		if open.objs&1 == 0 {
			i++
			goto value // which skips its own whitespace
		}
		i = skipSpace(b, i+1)
		goto key
	case '}':
		if open.objs&1 == 0 {
			return -1
		}
	case ']':
		if open.objs&1 != 0 {
			return -1
		}
	case ' ', '\t', '\n', '\r':
		i = skipSpace(b, i+1)
		goto ended
	default:
		return -1
	}
	open.pop(sc)
	i++
	goto ended
}

// member is one "key": value pair of an object, as offsets into the record.
type member struct {
	// Offsets are int32, which a record (at most MaxFrameBytes) never
	// outgrows: a smaller member is cheaper to append and to search.
	keyStart, keyEnd int32 // the key's content, without quotes
	valStart, valEnd int32 // the value's bytes
	// sig is keySig of the key, so that lookups compare one word before
	// comparing bytes; 0 when the key has escapes (compared the slow way).
	sig    uint32
	keyEsc bool
}

// keySig summarises a key: its length, first and last byte.
func keySig[T string | []byte](key T) uint32 {
	if len(key) == 0 {
		return 1 << 31
	}
	return uint32(len(key))<<16 | uint32(key[0])<<8 | uint32(key[len(key)-1])
}

// keyHash spreads a key signature over 32 bits (Fibonacci hashing), so
// that its top bits can index small tables.
func keyHash(sig uint32) uint32 {
	return sig * 0x9E3779B1
}

// keyBit maps a key signature to one bit of a 64-bit set (a one-hash
// Bloom filter).
func keyBit(sig uint32) uint64 {
	return 1 << (keyHash(sig) >> (32 - 6))
}

// keySet summarises the keys of one object for Schema.lookup.
type keySet struct {
	bits uint64 // keyBit of every key without escapes
	// distinct says that no key has escapes and no two keys share a bit:
	// then a name whose bit is clear is absent, and a name is present at
	// most once (so duplicate keys, which resolve to the last one, always
	// take the exhaustive path).
	distinct bool
}

// appendMembers validates the object starting at b[i] == '{' and appends
// its members to ms. It returns the index after the closing brace, or -1,
// and the summary of the keys.
func (sc *scanner) appendMembers(ms []member, b []byte, i int) ([]member, int, keySet) {
	keys := keySet{distinct: true}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return ms, i + 1, keys
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return ms, -1, keys
		}
		m := member{keyStart: int32(i + 1)}
		// Keys are short and plain: find the closing quote inline and
		// leave escapes and record ends to skipString.
		if end := jsjson.PlainEnd(b, i+1); end < len(b) && b[end] == '"' {
			m.keyEnd = int32(end)
		} else if end, m.keyEsc = skipString(b, i); end >= 0 {
			m.keyEnd = int32(end - 1)
		} else {
			return ms, -1, keys
		}
		if m.keyEsc {
			keys.distinct = false
		} else {
			m.sig = keySig(b[m.keyStart:m.keyEnd])
			bit := keyBit(m.sig)
			if keys.bits&bit != 0 {
				keys.distinct = false
			}
			keys.bits |= bit
		}
		i = int(m.keyEnd) + 1
		if i < len(b) && b[i] == ':' {
			i++
		} else if i = skipSpace(b, i); i < len(b) && b[i] == ':' {
			i++
		} else {
			return ms, -1, keys
		}
		if i = skipSpace(b, i); i >= len(b) {
			return ms, -1, keys
		}
		m.valStart = int32(i)
		if i = sc.valueEnd(b, i); i < 0 {
			return ms, -1, keys
		}
		m.valEnd = int32(i)
		ms = append(ms, m)
		if i = skipSpace(b, i); i >= len(b) {
			return ms, -1, keys
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return ms, i + 1, keys
		default:
			return ms, -1, keys
		}
	}
}

// valueEnd returns the index after the value starting at b[i] (not
// whitespace), or -1 when it is not valid JSON. Scalars, the common case,
// need no stack.
func (sc *scanner) valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		if end := jsjson.PlainEnd(b, i+1); end < len(b) && b[end] == '"' {
			return end + 1
		}
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		return sc.skipContainer(b, i)
	case 't':
		return skipLiteral(b, i, "true")
	case 'f':
		return skipLiteral(b, i, "false")
	case 'n':
		return skipLiteral(b, i, "null")
	}
	return skipNumber(b, i)
}

// nextElement returns the bounds of the array element at or after b[i],
// where i is just after '[' or just after the previous element. ok is false
// at the closing bracket. The array must already be known valid.
func (sc *scanner) nextElement(b []byte, i int, first bool) (start, end int, ok bool) {
	i = skipSpace(b, i)
	if b[i] == ']' {
		return 0, 0, false
	}
	if !first { // b[i] == ','
		i = skipSpace(b, i+1)
	}
	return i, sc.skipValue(b, i), true
}

// unquote returns the Go string for the JSON string token b (with quotes).
// Invalid UTF-8 and lone surrogates become U+FFFD, as in encoding/json;
// JavaScript's own UTF-8 decoding replaces the same bytes.
func unquote(b []byte, esc bool) string {
	in := b[1 : len(b)-1]
	if !esc && utf8.Valid(in) {
		return string(in)
	}
	return string(appendUnquoted(make([]byte, 0, len(in)), in))
}

// appendUnquoted appends the unescaped content of a valid JSON string body.
func appendUnquoted(dst, in []byte) []byte {
	for i := 0; i < len(in); {
		c := in[i]
		if c == '\\' {
			switch in[i+1] {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(in[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(in) && in[i] == '\\' && in[i+1] == 'u' {
						if pair := utf16.DecodeRune(r, hex4(in[i+2:])); pair != utf8.RuneError {
							dst = utf8.AppendRune(dst, pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, in[i+1])
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(in[i:])
		dst = utf8.AppendRune(dst, r) // RuneError for invalid bytes
		i += size
	}
	return dst
}

func hex4(b []byte) rune {
	return hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3])
}

// parseNumber converts a valid JSON number token to float64. Integers of up
// to 15 digits take a fast exact path; everything else goes to strconv,
// which rounds exactly like JavaScript.
func parseNumber(b []byte) (float64, bool) {
	if len(b) <= 15 {
		neg := b[0] == '-'
		digits := b
		if neg {
			digits = b[1:]
		}
		var n int64
		fast := true
		for _, c := range digits {
			if c < '0' || c > '9' {
				fast = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if fast {
			if neg {
				if n == 0 {
					return negZero, true
				}
				return float64(-n), true
			}
			return float64(n), true
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		// Only a range error is possible for a valid token: the value is
		// beyond ±MaxFloat64, which JSON cannot carry back out.
		return 0, false
	}
	return f, true
}

var negZero = math.Copysign(0, -1)
