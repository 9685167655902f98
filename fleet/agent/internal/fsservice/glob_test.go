package fsservice

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGlob(t *testing.T) {
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"**/*.ts", "src/app.ts", true},
		{"**/*.ts", "app.ts", true}, // **/ may be zero directories
		{"**/*.ts", "a/b/c/app.ts", true},
		{"**/*.ts", "src/app.tsx", false},
		{"*.ts", "src/app.ts", false}, // * stays within a segment
		{"*.ts", "app.ts", true},
		{"src/**", "src/a/b.go", true},
		{"src/**", "src/", true},
		{"src/**", "srcx/a", false},
		{"**", "anything/at/all", true},
		{"**", "", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/xb", false}, // **/ ends at a slash
		{"?.go", "a.go", true},
		{"?.go", "ab.go", false},
		{"?", "/", false}, // ? never matches a slash
		{"?", "é", true},  // ? is one character, not one byte
		{"a.b", "axb", false},
		{"[ab].go", "[ab].go", true}, // everything else is literal
		{"[ab].go", "a.go", false},
		{"{a,b}", "{a,b}", true},
		{"a+b(c)", "a+b(c)", true},
		{"", "", true},
		{"", "a", false},
		{"x", "\xff", false},
		{"\xff", "\xff", true},
		{"***", "a/b", true},
		{strings.Repeat("*", 40) + "b", strings.Repeat("a", 60), false}, // no backtracking blow-up
	}
	for _, c := range cases {
		if got := CompileGlob(c.glob).Match(c.path); got != c.want {
			t.Errorf("glob %q match %q = %v, want %v", c.glob, c.path, got, c.want)
		}
		if utf8.ValidString(c.glob) && utf8.ValidString(c.path) {
			if got := globRegexp(c.glob).MatchString(c.path); got != c.want {
				t.Errorf("oracle: glob %q match %q = %v, want %v", c.glob, c.path, got, c.want)
			}
		}
	}
}

// globRegexp is an independent implementation of the same syntax, by
// translation to a regular expression; the fuzz target checks the two agree.
func globRegexp(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i := 0; i < len(glob); {
		switch {
		case strings.HasPrefix(glob[i:], "**/"):
			b.WriteString(`(?:.*/)?`)
			i += 3
		case strings.HasPrefix(glob[i:], "**"):
			b.WriteString(`.*`)
			i += 2
		case glob[i] == '*':
			b.WriteString(`[^/]*`)
			i++
		case glob[i] == '?':
			b.WriteString(`[^/]`)
			i++
		default:
			_, n := utf8.DecodeRuneInString(glob[i:])
			b.WriteString(regexp.QuoteMeta(glob[i : i+n]))
			i += n
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

func FuzzGlob(f *testing.F) {
	f.Add("**/*.ts", "src/app.ts")
	f.Add("a/**/b?c*", "a/x/y/bzc")
	f.Add("*/**", "a/")
	f.Add("?*?", "é/")
	f.Fuzz(func(t *testing.T, glob, path string) {
		got := CompileGlob(glob).Match(path)
		if !utf8.ValidString(glob) || !utf8.ValidString(path) {
			return // the oracle's regexp engine cannot express raw bytes
		}
		if want := globRegexp(glob).MatchString(path); got != want {
			t.Fatalf("glob %q match %q = %v, oracle says %v", glob, path, got, want)
		}
		// A glob without metacharacters matches only itself.
		if !strings.ContainsAny(glob, "*?") && got != (glob == path) {
			t.Fatalf("literal glob %q match %q = %v", glob, path, got)
		}
	})
}

func BenchmarkGlobMatch(b *testing.B) {
	g := CompileGlob("**/internal/**/*_test.go")
	path := "fleet/agent/internal/fsservice/glob_test.go"
	b.ReportAllocs()
	for b.Loop() {
		if !g.Match(path) {
			b.Fatal("no match")
		}
	}
}
