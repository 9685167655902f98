package jsonscan

import (
	"math/bits"
	"testing"
)

// TestSpecialBytes checks the word trick against the byte-wise definition:
// every byte value at every position, among plain bytes and after a stop.
func TestSpecialBytes(t *testing.T) {
	isStop := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' }
	firstStop := func(w [8]byte) int {
		for k, c := range w {
			if isStop(c) {
				return k
			}
		}
		return 8
	}
	for _, fill := range []byte{'a', 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xff, 0x00, '"'} {
		for pos := range 8 {
			for v := range 256 {
				var w [8]byte
				for k := range w {
					w[k] = fill
				}
				w[pos] = byte(v)
				x := uint64(0)
				for k := 7; k >= 0; k-- {
					x = x<<8 | uint64(w[k])
				}
				got := 8
				if m := SpecialBytes(x); m != 0 {
					got = bits.TrailingZeros64(m) >> 3
				}
				if want := firstStop(w); got != want {
					t.Fatalf("first stop in % x: got %d, want %d", w, got, want)
				}
			}
		}
	}
}

// TestPlainEnd finds the first stop byte of records of every length up to
// 20, the stop at every position, as a byte loop would.
func TestPlainEnd(t *testing.T) {
	for n := range 21 {
		for pos := -1; pos < n; pos++ {
			b := make([]byte, n)
			for k := range b {
				b[k] = 'a'
			}
			if pos >= 0 {
				b[pos] = '"'
			}
			got := PlainEnd(b, 0)
			// PlainEnd stops at the first stop byte, or where fewer than
			// eight bytes remain.
			want := pos
			if pos < 0 || pos >= n/8*8 {
				want = n / 8 * 8
			}
			if got != want {
				t.Fatalf("PlainEnd(%q, 0) = %d, want %d", b, got, want)
			}
		}
	}
}
