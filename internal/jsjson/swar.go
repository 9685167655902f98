package jsjson

import (
	"encoding/binary"
	"math/bits"
)

// Word-at-a-time ("SWAR") helpers shared by this package's encoder,
// transport's frame scanner and pirpc's line scanner: all need to find,
// eight bytes at a time, the next byte of a JSON string that is not plain
// printable ASCII.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// SpecialBytes flags, in the high bit of each byte, the bytes of the
// little-endian word x that are a quote, a backslash or a control
// character (< 0x20): the bytes that end a run of string content that needs
// no escaping. q = x^0x02 maps the quote (0x22) to 0x20 and the control
// bytes onto themselves, so "q < 0x21" finds both; s = x^'\\' is zero at a
// backslash. A byte below 0x80 whose subtraction borrows is one of those;
// a byte of 0x80 or more is masked out by the high bits of q|s. As in
// every such word trick a borrow can flag a byte above a true match,
// never below one, so the lowest flagged byte is exact.
func SpecialBytes(x uint64) uint64 {
	q := x ^ (swarOnes * 0x02)
	s := x ^ (swarOnes * '\\')
	return ((q - swarOnes*0x21) | (s - swarOnes)) &^ (q | s) & swarHigh
}

// PlainEnd skips plain string content (anything but a quote, a backslash
// or a control byte) eight bytes at a time from b[i]. It returns the index
// of the first byte that is not plain, or the index where fewer than eight
// bytes remain, whichever comes first: the caller looks at that byte. It
// is small so that it inlines into the scanning loops of its callers.
func PlainEnd(b []byte, i int) int {
	// Written so that the compiler proves the loads in bounds.
	for last := len(b) - 8; i <= last && i >= 0; i += 8 {
		if m := SpecialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return i
}

// plainASCIIPrefix returns how many leading bytes of s are printable ASCII
// other than quote and backslash, looking at whole eight-byte words only:
// a shorter tail is left to the caller's byte loop.
func plainASCIIPrefix(s string) int {
	i := 0
	for i+8 <= len(s) {
		x := load64(s[i : i+8])
		if m := SpecialBytes(x) | x&swarHigh; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// load64 reads the first eight bytes of s as a little-endian word; the
// compiler turns the shifts into one load, without converting s to a slice.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
