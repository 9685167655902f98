package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"plain":          {"hello, wörld\n\tindented", "hello, wörld\n\tindented"},
		"colour":         {"\x1b[31mred\x1b[0m text", "red text"},
		"cursor moves":   {"a\x1b[2J\x1b[H\x1b[10;20Hb", "ab"},
		"title via OSC":  {"x\x1b]0;pwned\x07y", "xy"},
		"OSC with ST":    {"x\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\y", "xlinky"},
		"DCS":            {"a\x1bPq#0;2;0;0;0\x1b\\b", "ab"},
		"8-bit CSI":      {"a\u009b31mb", "ab"},
		"8-bit OSC":      {"a\u009d0;t\u009cb", "ab"},
		"charset select": {"a\x1b(Bb", "ab"},
		"carriage":       {"safe\rEVIL", "safeEVIL"},
		"backspace":      {"ab\b\bXY", "abXY"},
		"bell and nul":   {"a\x07b\x00c", "abc"},
		"invalid utf8":   {"a\xffb", "a\uFFFDb"},
		"dangling ESC":   {"end\x1b", "end"},
		"unended CSI":    {"end\x1b[31", "end"},
		"unended OSC":    {"end\x1b]0;title", "end"},
		"DEL":            {"a\x7fb", "ab"},
	} {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("%s: Clean(%q) = %q, want %q", name, tc.in, got, tc.want)
		}
	}
}

func TestCleanReturnsSafeTextAsItIs(t *testing.T) {
	s := strings.Repeat("plain text\n", 100)
	if got := Clean(s); got != s {
		t.Fatal("safe text changed")
	}
	if n := testing.AllocsPerRun(100, func() { Clean(s) }); n != 0 {
		t.Errorf("Clean of safe text allocates %v times", n)
	}
}

// Whatever the input, the output has no control character but '\n' and
// '\t', is valid UTF-8, and is a fixed point.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "a\x1b[31mb", "\x1b]0;t\x07", "\u009b1m", "\xff\xfe", "x\ry", "\x1bP\x1b\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Clean(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Clean(%q) = %q: invalid UTF-8", s, out)
		}
		for _, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("Clean(%q) = %q keeps control character %U", s, out, r)
			}
		}
		if again := Clean(out); again != out {
			t.Fatalf("Clean is not idempotent on %q: %q then %q", s, out, again)
		}
	})
}
