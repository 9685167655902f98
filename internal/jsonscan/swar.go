package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// Word-at-a-time ("SWAR") helpers: the scanner, and the JavaScript-exact
// encoder of internal/jsjson, look at eight bytes at a time for the next
// byte of a string that is not plain printable ASCII, and for the end of a
// run of digits.
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

// PlainASCII reports whether the body of a valid JSON string is ASCII
// without escapes, so that its bytes are its value. (A valid body holds
// no quote or control byte but inside escapes.)
func PlainASCII(s []byte) bool {
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
