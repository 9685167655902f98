// Package termsafe makes untrusted text safe to print on a terminal.
//
// A worker's output, its files and its dialogs are written by a model and
// by whatever tools it ran: printed as they are, an escape sequence in them
// could move the cursor, rewrite what the operator already read, change
// the window title, or ask some terminals to answer with input of their
// own. Clean removes every such sequence and every other control
// character, keeping newlines and tabs, so that what is printed is only
// what it looks like.
package termsafe

import (
	"strings"
	"unicode/utf8"
)

// Clean returns s without terminal escape sequences (CSI, OSC, DCS and the
// other ESC-introduced forms, in their 7-bit and 8-bit spellings) and
// without control characters other than '\n' and '\t'. A '\r' is dropped,
// as is every invalid UTF-8 byte (replaced by U+FFFD). Text without any of
// these is returned unchanged.
func Clean(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
			i++
		case r == 0x1b: // ESC
			i = skipEscape(s, i+1)
		case r == 0x9b: // 8-bit CSI
			i = skipCSI(s, i+size)
		case r == 0x9d || r == 0x90 || r == 0x9e || r == 0x9f || r == 0x98: // 8-bit OSC, DCS, PM, APC, SOS
			i = skipString(s, i+size)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
			i += size
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			i += size
		default:
			b.WriteString(s[i : i+size])
			i += size
		}
	}
	return b.String()
}

// safe reports whether s has nothing Clean would change.
func safe(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// skipEscape skips what follows an ESC at i and returns the index after
// the sequence.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']', 'P', '^', '_', 'X':
		return skipString(s, i+1)
	}
	// ESC, then intermediate bytes (0x20–0x2f), then one final byte.
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipCSI skips a control sequence's parameter and intermediate bytes
// (0x20–0x3f) and its final byte (0x40–0x7e). A byte of neither kind ends
// a malformed sequence without being skipped: Clean looks at it on its own.
func skipCSI(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case c >= 0x40 && c <= 0x7e:
			return i + 1
		case c >= 0x20 && c <= 0x3f:
			i++
		default:
			return i
		}
	}
	return i
}

// skipString skips a control string (OSC, DCS, …) up to its terminator:
// BEL, ESC \, or the 8-bit ST.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case strings.HasPrefix(s[i:], "\u009c"):
			return i + len("\u009c")
		}
		i++
	}
	return i
}
