package jsjson

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// Append appends v to dst as compact JSON, exactly as JSON.stringify writes
// the same value.
func Append(dst []byte, v *Value) []byte {
	return appendValue(dst, v, "", 0)
}

// AppendIndent appends v as JSON.stringify(v, null, indent) writes it: one
// member or item per line, nested levels indented by indent, "[]" and "{}"
// for empty containers. It adds no trailing newline.
func AppendIndent(dst []byte, v *Value, indent string) []byte {
	return appendValue(dst, v, indent, 0)
}

func appendValue(dst []byte, v *Value, indent string, level int) []byte {
	switch v.Kind {
	case Null:
		return append(dst, "null"...)
	case Bool:
		return strconv.AppendBool(dst, v.Bool)
	case Number:
		return AppendNumber(dst, v.Num)
	case String:
		return AppendString(dst, v.Str)
	case Array:
		if len(v.Items) == 0 {
			return append(dst, "[]"...)
		}
		dst = append(dst, '[')
		for i := range v.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = newline(dst, indent, level+1)
			dst = appendValue(dst, &v.Items[i], indent, level+1)
		}
		dst = newline(dst, indent, level)
		return append(dst, ']')
	case Object:
		if len(v.Members) == 0 {
			return append(dst, "{}"...)
		}
		dst = append(dst, '{')
		for i := range v.Members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = newline(dst, indent, level+1)
			dst = AppendString(dst, v.Members[i].Key)
			dst = append(dst, ':')
			if indent != "" {
				dst = append(dst, ' ')
			}
			dst = appendValue(dst, &v.Members[i].Value, indent, level+1)
		}
		dst = newline(dst, indent, level)
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

func newline(dst []byte, indent string, level int) []byte {
	if indent == "" {
		return dst
	}
	dst = append(dst, '\n')
	for range level {
		dst = append(dst, indent...)
	}
	return dst
}

// AppendNumber appends f as ECMAScript's Number::toString writes it (the
// shortest text that reads back as f; exponent form below 1e-6 and from
// 1e21), "0" for negative zero, and null for NaN and ±Inf, as
// JSON.stringify does.
func AppendNumber(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		// Integers (zero and negative zero included) print as themselves;
		// the common case in frames (seq, counts, timestamps).
		return strconv.AppendInt(dst, int64(f), 10)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs < 1e-6 || abs >= 1e21 {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// strconv writes e-07 and e+07; ECMAScript writes e-7 and e+7.
		n := len(dst)
		if n-start >= 4 && dst[n-4] == 'e' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string the way JSON.stringify writes
// it: ", \ and control characters escaped (\b \f \n \r \t, else \u00xx),
// everything else (HTML characters, U+2028, U+2029, non-ASCII) raw.
// Invalid UTF-8 is written as U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Fast path: skip runs of plain ASCII eight bytes at a time.
		if i+8 <= len(s) {
			if n := plainASCIIPrefix(s[i:]); n > 0 {
				i += n
				continue
			}
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
