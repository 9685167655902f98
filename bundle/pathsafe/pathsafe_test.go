package pathsafe_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle/pathsafe"
)

func TestCheckAcceptsOrdinaryPaths(t *testing.T) {
	for _, p := range []string{
		// Checklist 14.
		"skills/review/SKILL.md", "extensions/reviewer.ts", "a/b/c/d.txt", "README.md",
		"with space/file name.md", "comX/lpt10/console.ts",
		// Allowed by 1.22: spaces inside names, dotfiles, "..b".
		".gitignore", "a/.hidden/..b", "..b",
		// Not reserved names.
		"COM0", "LPT0", "COM¹.txt", "LPT²", "CONIN$", "CONOUT$", "CLOCK$", "console", "con .txt", "lpt10", "comX",
		// Non-ASCII and characters outside the BMP.
		"😀.txt", "Ａ.txt", "ünïcødé/ß.md", "a\u2028b",
	} {
		if err := pathsafe.Check(p); err != nil {
			t.Errorf("Check(%q) = %v, want nil", p, err)
		}
	}
}

func TestCheckRefusesEachRule(t *testing.T) {
	for _, tc := range []struct {
		path    string
		code    pathsafe.Code
		segment string
	}{
		{"", pathsafe.Empty, ""},
		{"/etc/passwd", pathsafe.Absolute, ""},
		{"C:/windows/system32", pathsafe.DriveLetter, ""},
		{"c:foo", pathsafe.DriveLetter, ""},
		{"a:b", pathsafe.DriveLetter, ""},
		{`skills\foo\SKILL.md`, pathsafe.Backslash, ""},
		{`/a\b`, pathsafe.Backslash, ""}, // backslash is checked before absolute
		{"../outside", pathsafe.Traversal, ".."},
		{"a/../../b", pathsafe.Traversal, ".."},
		{"./a", pathsafe.DotSegment, "."},
		{"a//b", pathsafe.EmptySegment, ""},
		{"a/", pathsafe.EmptySegment, ""},
		{"CON", pathsafe.ReservedName, "CON"},
		{"nul.txt", pathsafe.ReservedName, "nul.txt"},
		{"a/COM1/b.txt", pathsafe.ReservedName, "COM1"},
		{"a/Lpt9.log", pathsafe.ReservedName, "Lpt9.log"},
		{"prn.tar.gz", pathsafe.ReservedName, "prn.tar.gz"},
		{"aux", pathsafe.ReservedName, "aux"},
		{"a/file.", pathsafe.TrailingDotOrSpace, "file."},
		{"dir /file", pathsafe.TrailingDotOrSpace, "dir "},
		{"...", pathsafe.TrailingDotOrSpace, "..."},
		{"CON.", pathsafe.TrailingDotOrSpace, "CON."},
		{"a\x00b", pathsafe.InvalidCharacters, ""},
		{"a<b>.txt", pathsafe.InvalidCharacters, ""},
		{"what?.md", pathsafe.InvalidCharacters, ""},
		{`say"hi"`, pathsafe.InvalidCharacters, ""},
		{"pipe|x", pathsafe.InvalidCharacters, ""},
		{"star*", pathsafe.InvalidCharacters, ""},
		{"ab:c/z", pathsafe.InvalidCharacters, ""}, // ":" not right after a first letter
		{"tab\there", pathsafe.InvalidCharacters, ""},
		{"del\x7f", pathsafe.InvalidCharacters, ""},
		{"bad\xffutf8", pathsafe.InvalidCharacters, ""},
		// Per segment, left to right: the first bad segment decides.
		{"CON/../x", pathsafe.ReservedName, "CON"},
		{"a./..", pathsafe.TrailingDotOrSpace, "a."},
	} {
		err := pathsafe.Check(tc.path)
		var pe *pathsafe.Error
		if !errors.As(err, &pe) {
			t.Errorf("Check(%q) = %v, want %s", tc.path, err, tc.code)
			continue
		}
		if pe.Code != tc.code || pe.Segment != tc.segment || pe.Path != tc.path {
			t.Errorf("Check(%q) = {%s, segment %q}, want {%s, segment %q}", tc.path, pe.Code, pe.Segment, tc.code, tc.segment)
		}
		if !errors.Is(err, pathsafe.ErrUnsafe) {
			t.Errorf("Check(%q): errors.Is(err, ErrUnsafe) is false", tc.path)
		}
		if !strings.Contains(err.Error(), string(tc.code)) {
			t.Errorf("message %q does not name the rule %s", err, tc.code)
		}
	}
}

func TestCheckSetCaseCollision(t *testing.T) {
	err := pathsafe.CheckSet([]string{"src/Foo.ts", "src/foo.ts", "src/bar.ts"})
	var se *pathsafe.SetError
	if !errors.As(err, &se) {
		t.Fatalf("CheckSet = %v, want *SetError", err)
	}
	want := []*pathsafe.Error{{Path: "src/foo.ts", Code: pathsafe.CaseCollision, CollidesWith: "src/Foo.ts"}}
	if d := cmp.Diff(want, se.Errors); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
}

func TestCheckSetReportsEveryError(t *testing.T) {
	err := pathsafe.CheckSet([]string{"../x", "ok.ts", "CON", "a.ts", "A.TS", "ok.ts"})
	var se *pathsafe.SetError
	if !errors.As(err, &se) {
		t.Fatalf("CheckSet = %v, want *SetError", err)
	}
	want := []*pathsafe.Error{
		{Path: "../x", Code: pathsafe.Traversal, Segment: ".."},
		{Path: "CON", Code: pathsafe.ReservedName, Segment: "CON"},
		{Path: "A.TS", Code: pathsafe.CaseCollision, CollidesWith: "a.ts"},
	}
	if d := cmp.Diff(want, se.Errors); d != "" {
		t.Errorf("errors (-want +got):\n%s", d)
	}
	// Each error is reachable with errors.As and the set with errors.Is.
	var first *pathsafe.Error
	if !errors.As(err, &first) || first.Code != pathsafe.Traversal {
		t.Errorf("errors.As found %+v, want the traversal error", first)
	}
	if !errors.Is(err, pathsafe.ErrUnsafe) {
		t.Error("errors.Is(set error, ErrUnsafe) is false")
	}
	for _, s := range []string{"3 unsafe paths", "../x", "CON", "A.TS"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
}

func TestCheckSetAcceptsDistinctPaths(t *testing.T) {
	if err := pathsafe.CheckSet([]string{"a.ts", "b.ts", "c/d.ts"}); err != nil {
		t.Errorf("CheckSet = %v", err)
	}
	if err := pathsafe.CheckSet(nil); err != nil {
		t.Errorf("CheckSet(nil) = %v", err)
	}
}

// The set rule folds case as JavaScript does: İ lowers to "i" + U+0307,
// so it collides with that pair and not with a plain "i" (Go's
// strings.ToLower would say the opposite).
func TestCheckSetFoldsCaseLikeJavaScript(t *testing.T) {
	for _, tc := range []struct {
		a, b    string
		collide bool
	}{
		{"İ.txt", "i\u0307.txt", true},
		{"İ.txt", "i.txt", false},
		{"ΟΔΟΣ", "οδος", true},         // final sigma
		{"ΟΔΟΣ", "οδοσ", false},        // σ is not final here
		{"ΟΔΟΣ.txt", "οδοσ.txt", true}, // "." is case-ignorable, "t" is cased: not final
		{"ΟΔΟΣ/x", "οδος/x", true},     // "/" ends the word
		{"Ǆ.md", "ǆ.md", true},
		{"Ω.md", "ω.md", true},
		{"K.md", "k.md", true}, // KELVIN SIGN lowers to k
	} {
		err := pathsafe.CheckSet([]string{tc.a, tc.b})
		if got := err != nil; got != tc.collide {
			t.Errorf("CheckSet(%q, %q) collision = %v (%v), want %v", tc.a, tc.b, got, err, tc.collide)
		}
	}
}

func TestLowerJS(t *testing.T) {
	for in, want := range map[string]string{
		"README.md": "readme.md",
		"İ":         "i\u0307",
		"Σ":         "σ", // not preceded by a cased letter
		"ΑΣ":        "ας",
		"ΑΣΑ":       "ασα",
		"ΑΣ'Α":      "ασ'α", // apostrophe is case-ignorable, the next letter is cased
		"Α\u0301Σ":  "α\u0301ς",
		"ΑΣ1":       "ας1",
		"ÀÉÎ":       "àéî",
		"😀Ａ":        "😀ａ",
	} {
		if got := pathsafe.LowerJS(in); got != want {
			t.Errorf("LowerJS(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestJoin(t *testing.T) {
	root := filepath.Join("tmp", "root")
	got, err := pathsafe.Join(root, "a/b/c.txt")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "a", "b", "c.txt"); got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
	_, err = pathsafe.Join(root, "../escape")
	var pe *pathsafe.Error
	if !errors.As(err, &pe) || pe.Code != pathsafe.Traversal || !strings.Contains(err.Error(), "traversal") {
		t.Errorf("Join(../escape) = %v, want a traversal error", err)
	}
}

func TestWithin(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := pathsafe.Within(root, "sub/file.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got, filepath.Join("sub", "file.txt")) {
		t.Errorf("Within = %q, want a path ending in sub/file.txt", got)
	}
	if _, err := pathsafe.Within(root, "."); err != nil {
		t.Errorf("Within(root, .) = %v, want the root itself", err)
	}

	_, err = pathsafe.Within(root, "../outside")
	var ee *pathsafe.EscapeError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "escapes root") || !errors.Is(err, pathsafe.ErrUnsafe) {
		t.Errorf("Within(../outside) = %v, want an escape error", err)
	}

	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
	for _, p := range []string{"link/secret.txt", "link", "link/not/yet/created"} {
		if _, err := pathsafe.Within(root, p); !errors.As(err, &ee) {
			t.Errorf("Within(%q) through a link leaving the root = %v, want an escape error", p, err)
		}
	}
}
