package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"strings"
	"testing"

	"example.com/pifleet/internal/jsonscan/jsontest"
)

// scanValid is what the scanner says about b: one JSON value, optionally
// surrounded by whitespace. It also checks that skipValue stops exactly
// at the end of the value.
func scanValid(t *testing.T, sc *Scanner, b []byte) bool {
	t.Helper()
	end := sc.SkipValue(b, 0)
	if end < 0 {
		return false
	}
	if end > len(b) {
		t.Fatalf("skipValue(%q) = %d, past the end", b, end)
	}
	if end > 0 && IsSpace(b[end-1]) {
		t.Fatalf("skipValue(%q) = %d, after trailing whitespace", b, end)
	}
	return SkipSpace(b, end) == len(b)
}

// TestSkipValueAgreesWithJSONValid compares the scanner with json.Valid on
// the cases above, each alone, truncated at every byte, and nested in an
// array and an object (so that strings end within the last eight bytes of
// the input as well as far from it).
func TestSkipValueAgreesWithJSONValid(t *testing.T) {
	var sc Scanner
	check := func(b []byte) {
		t.Helper()
		if got, want := scanValid(t, &sc, b), json.Valid(b); got != want {
			t.Errorf("scanner says valid=%v, json.Valid says %v, for %q", got, want, b)
		}
	}
	for _, c := range jsontest.Cases {
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
	var sc Scanner
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

// TestPlainASCII checks the word-at-a-time test against its definition, for
// every byte value at every position of bodies up to 20 bytes long.
func TestPlainASCII(t *testing.T) {
	for n := 1; n <= 20; n++ {
		for pos := range n {
			for v := range 256 {
				body := bytes.Repeat([]byte{'a'}, n)
				body[pos] = byte(v)
				want := v != '\\' && v < 0x80
				if got := PlainASCII(body); got != want {
					t.Fatalf("PlainASCII(%q) = %v, want %v", body, got, want)
				}
			}
		}
	}
	if !PlainASCII(nil) {
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
