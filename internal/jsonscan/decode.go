package jsonscan

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote returns the Go string for the valid JSON string token b (with
// quotes); esc says whether it has escapes. Invalid UTF-8 and lone
// surrogates become U+FFFD, as in encoding/json; JavaScript's own UTF-8
// decoding replaces the same bytes.
func Unquote(b []byte, esc bool) string {
	in := b[1 : len(b)-1]
	if !esc && utf8.Valid(in) {
		return string(in)
	}
	return string(AppendUnquoted(make([]byte, 0, len(in)), in))
}

// AppendUnquoted appends the unescaped content of a valid JSON string body
// (without quotes).
func AppendUnquoted(dst, in []byte) []byte {
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

// ParseNumber converts a valid JSON number token to float64. Integers of
// up to 15 digits take a fast exact path; everything else goes to strconv,
// which rounds exactly like JavaScript. ok is false when the number is
// beyond ±MaxFloat64 (JavaScript's Infinity); f is then ±Inf.
func ParseNumber(b []byte) (f float64, ok bool) {
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
	// Only a range error is possible for a valid token: the value is
	// beyond ±MaxFloat64, which JSON cannot carry back out.
	return f, err == nil
}

var negZero = math.Copysign(0, -1)
