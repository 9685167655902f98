package jsjson

import "math/bits"

// Word-at-a-time ("SWAR") helpers shared by this package's encoder and
// transport's frame scanner: both need to find, eight bytes at a time, the
// next byte of a JSON string that is not plain printable ASCII.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// SpecialBytes flags, in the high bit of each byte, the bytes of the
// little-endian word x that are a quote, a backslash or a control
// character (< 0x20): the bytes that end a run of string content that needs
// no escaping. These are the classic "has zero byte" and "has byte less
// than n" tricks; a borrow can flag a byte above a true match, never below
// one, so the lowest flagged byte is exact.
func SpecialBytes(x uint64) uint64 {
	quote := x ^ (swarOnes * '"')
	slash := x ^ (swarOnes * '\\')
	return ((quote-swarOnes)&^quote | (slash-swarOnes)&^slash | (x-swarOnes*0x20)&^x) & swarHigh
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
