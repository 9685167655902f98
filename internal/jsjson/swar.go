package jsjson

import (
	"math/bits"

	"example.com/pifleet/internal/jsonscan"
)

// The encoder's word-at-a-time helpers work on strings; the byte-slice
// ones (jsonscan.SpecialBytes) are shared with the scanner.
const swarHigh = 0x8080808080808080

// plainASCIIPrefix returns how many leading bytes of s are printable ASCII
// other than quote and backslash, looking at whole eight-byte words only:
// a shorter tail is left to the caller's byte loop.
func plainASCIIPrefix(s string) int {
	i := 0
	for i+8 <= len(s) {
		x := load64(s[i : i+8])
		if m := jsonscan.SpecialBytes(x) | x&swarHigh; m != 0 {
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
