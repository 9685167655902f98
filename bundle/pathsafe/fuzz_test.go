package pathsafe_test

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"example.com/pifleet/bundle/pathsafe"
)

// FuzzCheck checks the promises a safe path makes: it joins to a path
// strictly inside the root, with the same number of segments, and no
// segment is "", "." or "..".
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a/b.txt", "../x", "CON", "a//b", "C:x", `a\b`, "İ", "x/ΟΔΟΣ", "a/b/", "nul.txt", "\x00"} {
		f.Add(s)
	}
	root := filepath.Join(string(filepath.Separator)+"fuzz", "root")
	f.Fuzz(func(t *testing.T, p string) {
		err := pathsafe.Check(p)
		setErr := pathsafe.CheckSet([]string{p})
		if (err == nil) != (setErr == nil) {
			t.Fatalf("Check(%q) = %v but CheckSet = %v", p, err, setErr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "unsafe path") {
				t.Fatalf("message %q", err)
			}
			return
		}
		if !utf8.ValidString(p) {
			t.Fatalf("accepted invalid UTF-8 %q", p)
		}
		native, err := pathsafe.Join(root, p)
		if err != nil {
			t.Fatalf("Join refused a path Check accepted: %v", err)
		}
		rel, err := filepath.Rel(root, native)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
			t.Fatalf("Join(%q) = %q leaves the root (rel %q, %v)", p, native, rel, err)
		}
		segs := strings.Split(p, "/")
		if got := len(strings.Split(rel, string(filepath.Separator))); got != len(segs) {
			t.Fatalf("Join(%q) = %q has %d segments, want %d", p, native, got, len(segs))
		}
		for _, s := range segs {
			if s == "" || s == "." || s == ".." {
				t.Fatalf("accepted segment %q in %q", s, p)
			}
		}
	})
}

// FuzzCheckSet checks that the set rule is exactly "safe paths that fold to
// the same string", whatever the input.
func FuzzCheckSet(f *testing.F) {
	f.Add("a.txt", "A.TXT")
	f.Add("İ", "i\u0307")
	f.Add("ΟΔΟΣ", "οδος")
	f.Fuzz(func(t *testing.T, a, b string) {
		err := pathsafe.CheckSet([]string{a, b})
		safeA, safeB := pathsafe.Check(a) == nil, pathsafe.Check(b) == nil
		wantCollision := safeA && safeB && a != b && pathsafe.LowerJS(a) == pathsafe.LowerJS(b)
		want := !safeA || !safeB || wantCollision
		if (err != nil) != want {
			t.Fatalf("CheckSet(%q, %q) = %v, want error %v", a, b, err, want)
		}
	})
}

// FuzzLowerJS checks LowerJS against strings.ToLower outside the two
// characters where JavaScript's full mapping differs, and that it is stable.
func FuzzLowerJS(f *testing.F) {
	for _, s := range []string{"ABC", "İ", "ΑΣ", "Σ.Σ", "😀", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		got := pathsafe.LowerJS(s)
		if !strings.ContainsAny(s, "İΣ") {
			if want := strings.ToLower(s); got != want {
				t.Fatalf("LowerJS(%q) = %q, strings.ToLower = %q", s, got, want)
			}
		}
		if again := pathsafe.LowerJS(got); again != got {
			t.Fatalf("LowerJS not stable: %q -> %q -> %q", s, got, again)
		}
	})
}
