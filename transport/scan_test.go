package transport

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strings"
	"testing"
)

// scanValid is what the scanner says about b: one JSON value, optionally
// surrounded by whitespace. It also checks that skipValue stops exactly
// at the end of the value.
func scanValid(t *testing.T, sc *scanner, b []byte) bool {
	t.Helper()
	end := sc.skipValue(b, 0)
	if end < 0 {
		return false
	}
	if end > len(b) {
		t.Fatalf("skipValue(%q) = %d, past the end", b, end)
	}
	if end > 0 && isSpace[b[end-1]] {
		t.Fatalf("skipValue(%q) = %d, after trailing whitespace", b, end)
	}
	return skipSpace(b, end) == len(b)
}

// skipOracleCases are values and near-values that exercise every branch
// of the scanner: each is also tried inside containers and truncated at
// every byte, and checked against encoding/json's json.Valid.
var skipOracleCases = []string{
	`{}`, `[]`, `{ }`, `[ ]`, ` {"a" : [ 1 , 2 ] } `, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`,
	`{"a"}`, `{"a":}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`, `{"a":1]`, `[1}`, `]`, `}`, `[`, `{`,
	`"plain"`, `"twelve bytes"`, `"a\"b\\c\/d\be\ff\ng\rh\ti"`, `"\u00e9\uD83D\uDE00\ud800"`,
	`"\u12"`, `"\u12G4"`, `"\x"`, `"\'"`, "\"tab\there\"", "\"nl\nhere\"", "\"\x1f\"", "\"\x7f\"",
	"\"\xff\xfe invalid utf-8\"", "\"\xe2\x80\xa8 U+2028\"", `"unterminated`, `"ends in backslash\`,
	`0`, `-0`, `1.5e+10`, `-1E-2`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `0x10`, `1.5e3.2`, `123456789012345678901234567890`,
	`true`, `false`, `null`, `tru`, `nul`, `True`, `nulll`, `truefalse`,
	`[[[[[]]]]]`, `[[[[[]]]]`, `{"a":{"b":{"c":[{"d":null}]}}}`, `{"a":{"b":{"c":[{"d":null}]}}`,
	`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,` +
		`"delta":"Refactor the handler so that it returns early when the context is done."},` +
		`"message":{"role":"assistant","api":"anthropic-messages","timestamp":1730000000123}}`,
	"\t\r\n [\t1\r,\n2 ] \n", "[1\v]", "[1\f]", "\u00a0[]",
}

// TestSkipValueAgreesWithJSONValid compares the scanner with json.Valid on
// the cases above, each alone, truncated at every byte, and nested in an
// array and an object (so that strings end within the last eight bytes of
// the input as well as far from it).
func TestSkipValueAgreesWithJSONValid(t *testing.T) {
	var sc scanner
	check := func(b []byte) {
		t.Helper()
		if got, want := scanValid(t, &sc, b), json.Valid(b); got != want {
			t.Errorf("scanner says valid=%v, json.Valid says %v, for %q", got, want, b)
		}
	}
	for _, c := range skipOracleCases {
		for _, v := range []string{c, "[" + c + "]", `{"k":` + c + `}`, `[0,{"k":[` + c + `,"long string padding"]}]`} {
			for n := range len(v) + 1 {
				check([]byte(v[:n]))
			}
		}
	}
}

// TestSkipValueDeepNesting: nesting costs heap, not stack, and every open
// container must be closed by its own kind of bracket, also beyond the 64
// levels the scanner keeps in a register.
func TestSkipValueDeepNesting(t *testing.T) {
	var sc scanner
	for depth := 60; depth <= 200; depth += 7 {
		var open, closing []byte
		for k := range depth {
			if k%3 == 0 {
				open, closing = append(open, `{"k":`...), append([]byte{'}'}, closing...)
			} else {
				open, closing = append(open, '['), append([]byte{']'}, closing...)
			}
		}
		for flip := -1; flip < len(closing); flip++ {
			c := bytes.Clone(closing)
			if flip >= 0 {
				c[flip] = map[byte]byte{'}': ']', ']': '}'}[c[flip]]
			}
			v := append(append(bytes.Clone(open), "1"...), c...)
			if got, want := scanValid(t, &sc, v), json.Valid(v); got != want {
				t.Fatalf("depth %d, closer %d swapped: scanner says valid=%v, json.Valid says %v", depth, flip, got, want)
			}
		}
	}
	const depth = 100_000
	deep := strings.Repeat(`[{"a":`, depth) + "1" + strings.Repeat("}]", depth)
	if !scanValid(t, &sc, []byte(deep)) {
		t.Fatal("deeply nested valid value rejected")
	}
	if scanValid(t, &sc, []byte(deep[:len(deep)-1])) {
		t.Fatal("unclosed deeply nested value accepted")
	}
}

// FuzzSkipValue: the scanner and json.Valid agree on every input (below
// encoding/json's nesting limit of 10,000 levels).
func FuzzSkipValue(f *testing.F) {
	for _, c := range skipOracleCases {
		f.Add([]byte(c))
	}
	var sc scanner
	f.Fuzz(func(t *testing.T, b []byte) {
		if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) >= 10000 {
			return
		}
		if got, want := scanValid(t, &sc, b), json.Valid(b); got != want {
			t.Fatalf("scanner says valid=%v, json.Valid says %v, for %q", got, want, b)
		}
	})
}

// TestPlainASCII checks the word-at-a-time test against its definition, for
// every byte value at every position of bodies up to 20 bytes long.
func TestPlainASCII(t *testing.T) {
	for n := 1; n <= 20; n++ {
		for pos := range n {
			for v := range 256 {
				body := bytes.Repeat([]byte{'a'}, n)
				body[pos] = byte(v)
				want := v != '\\' && v < 0x80
				if got := plainASCII(body); got != want {
					t.Fatalf("plainASCII(%q) = %v, want %v", body, got, want)
				}
			}
		}
	}
	if !plainASCII(nil) {
		t.Error("the empty body is plain")
	}
}

// TestNonDigits checks the word trick against the byte-wise definition:
// every byte value at every position, among digits.
func TestNonDigits(t *testing.T) {
	for _, fill := range []byte{'0', '5', '9'} {
		for pos := range 8 {
			for v := range 256 {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(v)
				want := 8
				if v < '0' || v > '9' {
					want = pos
				}
				got := 8
				if m := nonDigits(binary.LittleEndian.Uint64(w)); m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if got != want {
					t.Fatalf("first non-digit in %q: got %d, want %d", w, got, want)
				}
			}
		}
	}
	for _, s := range []string{"1", "12345678", "123456789", "1730000000123,", "17300000001234567x", "0123456789012345678901234567890"} {
		want := len(s) - len(bytes.TrimLeft([]byte(s), "0123456789"))
		if got := skipDigits([]byte(s), 0); got != want {
			t.Errorf("skipDigits(%q) = %d, want %d", s, got, want)
		}
	}
}
