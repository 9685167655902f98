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
// stack per level and never the goroutine stack.

// isSpace reports JSON whitespace: space, tab, LF and CR. Nothing else
// (no NBSP, no BOM) is whitespace to JSON.parse either.
var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace[b[i]] {
		i++
	}
	return i
}

// skipString validates the string starting at b[i] == '"' and returns the
// index after its closing quote, or -1. esc reports whether the string
// contains a backslash escape.
func skipString(b []byte, i int) (end int, esc bool) {
	i++
	for {
		// Jump 8 bytes at a time to the next special byte.
		for i+8 <= len(b) {
			if m := jsjson.SpecialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return -1, esc
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return -1, esc
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return -1, esc
				}
				i += 6
			default:
				return -1, esc
			}
		case c < 0x20:
			return -1, esc
		default:
			i++ // only near the end of the record, where no word fits
		}
	}
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

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanner holds the reusable stack of open containers.
type scanner struct {
	stack []byte
}

// skipValue validates the JSON value starting at b[i] (leading whitespace
// allowed) and returns the index just after it, or -1 when the bytes are
// not one valid JSON value.
func (sc *scanner) skipValue(b []byte, i int) int {
	// Scalars, the common case, need no stack.
	i = skipSpace(b, i)
	if i < len(b) {
		switch b[i] {
		case '"':
			end, _ := skipString(b, i)
			return end
		case 't':
			return skipLiteral(b, i, "true")
		case 'f':
			return skipLiteral(b, i, "false")
		case 'n':
			return skipLiteral(b, i, "null")
		case '{', '[':
		default:
			return skipNumber(b, i)
		}
	}
	end, stack := skipContainer(b, i, sc.stack[:0])
	sc.stack = stack[:0]
	return end
}

// skipContainer is skipValue for objects and arrays; stack holds the open
// containers and is returned for reuse.
func skipContainer(b []byte, i int, stack []byte) (int, []byte) {
	for {
		// A value is expected at i.
		i = skipSpace(b, i)
		if i >= len(b) {
			return -1, stack
		}
		switch c := b[i]; c {
		case '"':
			if i, _ = skipString(b, i); i < 0 {
				return -1, stack
			}
		case '{':
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			if i = skipKey(b, i); i < 0 {
				return -1, stack
			}
			stack = append(stack, '{')
			continue
		case '[':
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			stack = append(stack, '[')
			continue
		case 't':
			i = skipLiteral(b, i, "true")
		case 'f':
			i = skipLiteral(b, i, "false")
		case 'n':
			i = skipLiteral(b, i, "null")
		default:
			i = skipNumber(b, i)
		}
		if i < 0 {
			return -1, stack
		}
		// A value ended at i: close containers or move to the next element.
	closing:
		for {
			if len(stack) == 0 {
				return i, stack
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1, stack
			}
			top := stack[len(stack)-1]
			switch b[i] {
			case ',':
				i++
				if top == '{' {
					if i = skipKey(b, skipSpace(b, i)); i < 0 {
						return -1, stack
					}
				}
				break closing
			case '}':
				if top != '{' {
					return -1, stack
				}
			case ']':
				if top != '[' {
					return -1, stack
				}
			default:
				return -1, stack
			}
			stack = stack[:len(stack)-1]
			i++
		}
	}
}

// skipKey validates `"key" :` at b[i] and returns the index after the colon.
func skipKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i, _ = skipString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return i + 1
}

// member is one "key": value pair of an object, as offsets into the record.
type member struct {
	keyStart, keyEnd int // the key's content, without quotes
	valStart, valEnd int // the value's bytes
	// sig is keySig of the key, so that lookups compare one word before
	// comparing bytes; 0 when the key has escapes (compared the slow way).
	sig    uint32
	keyEsc bool
}

// keySig summarises a key: its length, first and last byte.
func keySig(key string) uint32 {
	if len(key) == 0 {
		return 1 << 31
	}
	return uint32(len(key))<<16 | uint32(key[0])<<8 | uint32(key[len(key)-1])
}

// appendMembers validates the object starting at b[i] == '{' and appends
// its members to ms. It returns the index after the closing brace, or -1.
func (sc *scanner) appendMembers(ms []member, b []byte, i int) ([]member, int) {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return ms, i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return ms, -1
		}
		var m member
		m.keyStart = i + 1
		end, esc := skipString(b, i)
		if end < 0 {
			return ms, -1
		}
		m.keyEnd, m.keyEsc = end-1, esc
		if !esc {
			m.sig = keySig(string(b[m.keyStart:m.keyEnd]))
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return ms, -1
		}
		m.valStart = skipSpace(b, i+1)
		m.valEnd = sc.skipValue(b, m.valStart)
		if m.valEnd < 0 {
			return ms, -1
		}
		ms = append(ms, m)
		i = skipSpace(b, m.valEnd)
		if i >= len(b) {
			return ms, -1
		}
		switch b[i] {
		case '}':
			return ms, i + 1
		case ',':
			i = skipSpace(b, i+1)
		default:
			return ms, -1
		}
	}
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
