package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds arbitrary bytes to the readers as a session file. None may
// panic; the strict readers must agree with each other (Read and the cursor
// return the same entries, and reading on from any entry returns exactly
// the rest), and the tolerant Summarize must accept every file Read does,
// with the same leaf and count.
func FuzzParse(f *testing.F) {
	for _, p := range []string{
		agentFixture(baselineFile), agentFixture(cloneFile), agentFixture(scratchFile), agentFixture(legacyFile),
		brokenFixture("corrupt-middle.jsonl"), brokenFixture("duplicate-id.jsonl"), brokenFixture("v1.jsonl"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(header("x") + entry("00000001", "") + "\r\n\n" + entry("00000002", "00000001")[:20]))
	f.Add([]byte(`{"type":"session","version":2}` + "\n" + `{"type":"label","id":"1","parentId":null,"label":null}` + "\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "f.jsonl")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		const max = 4096
		file, readErr := Read(path, WithMaxLineBytes(max))
		sum, sumErr := Summarize(path, WithMaxLineBytes(max))
		all, _, curErr := EntriesAfter(path, "", WithMaxLineBytes(max))
		if readErr != nil {
			var le *LineError
			if !errors.As(readErr, &le) {
				t.Fatalf("Read error is not a *LineError: %v", readErr)
			}
			return
		}
		if sumErr != nil || curErr != nil {
			t.Fatalf("Read succeeded but Summarize: %v, cursor: %v", sumErr, curErr)
		}
		if sum.Leaf != file.Tree.Leaf() || sum.Entries != len(file.Entries) || sum.Corrupt != 0 || sum.Name != file.Name() {
			t.Fatalf("summary %+v disagrees with Read (leaf %q, %d entries, name %q)", sum, file.Tree.Leaf(), len(file.Entries), file.Name())
		}
		if d := cmp.Diff(ids(file.Entries), ids(all)); d != "" {
			t.Fatalf("cursor vs Read (-read +cursor):\n%s", d)
		}
		for i, e := range file.Entries {
			rest, _, err := EntriesAfter(path, e.ID, WithMaxLineBytes(max))
			if err != nil {
				t.Fatalf("after %s: %v", e.ID, err)
			}
			if d := cmp.Diff(ids(file.Entries[i+1:]), ids(rest)); d != "" {
				t.Fatalf("after %s (-want +got):\n%s", e.ID, d)
			}
		}
	})
}

// FuzzSearch checks the matcher (anchor on the rarest rune, verify around
// it) against a naive scan, and the snippet against the match.
func FuzzSearch(f *testing.F) {
	f.Add("Hello, World of Straße", "world")
	f.Add("ſecret \u212aelvin", "SECRET k")
	f.Add("aaaaab", "aab")
	f.Add("\xff\xfe", "\xff")
	f.Add("x\n\t y", "x")
	f.Fuzz(func(t *testing.T, text, query string) {
		if query == "" {
			return
		}
		m := newMatcher(query)
		s, e, ok := m.find([]byte(text))
		_, _, want := naiveFind([]byte(text), query)
		if ok != want {
			t.Fatalf("find(%q in %q) = %v, naive %v", query, text, ok, want)
		}
		if !ok {
			return
		}
		if _, _, again := naiveFind([]byte(text[s:e]), query); !again {
			t.Fatalf("reported match %q is not a match of %q", text[s:e], query)
		}
		snip := makeSnippet([]byte(text), s, e, 80)
		if strings.Contains(snip, "  ") || strings.TrimSpace(snip) != snip {
			t.Fatalf("snippet %q has uncollapsed whitespace", snip)
		}
		if matched := text[s:e]; !strings.ContainsFunc(matched, unicode.IsSpace) && !strings.Contains(snip, matched) {
			t.Fatalf("snippet %q lacks the match %q", snip, matched)
		}
	})
}

// FuzzNames checks that task names parse back and slugs are bounded fixed
// points.
func FuzzNames(f *testing.F) {
	f.Add("t42", "Fix the failing tests")
	f.Add("x", "日本語 ----")
	f.Fuzz(func(t *testing.T, id, title string) {
		slug := Slugify(title)
		if len(slug) > MaxSlugLen || Slugify(slug) != slug || strings.HasPrefix(slug, "-") || strings.HasSuffix(slug, "-") {
			t.Fatalf("Slugify(%q) = %q", title, slug)
		}
		name, err := TaskName(id, title)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("TaskName error %v is not ErrInvalidName", err)
			}
			return
		}
		p, err := ParseName(name)
		if err != nil || p.Kind != KindTask || p.TaskID != id || (slug != "" && p.Slug != slug) {
			t.Fatalf("ParseName(%q) = %+v, %v", name, p, err)
		}
	})
}

// FuzzLister lists a root holding one arbitrary file: it never fails, and the
// file is either listed or reported as skipped.
func FuzzLister(f *testing.F) {
	b, _ := os.ReadFile(agentFixture(cloneFile))
	f.Add(b)
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "s.jsonl"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := NewLister(root, WithMaxLineBytes(4096)).List(context.Background())
		if err != nil || len(l.Sessions)+len(l.Skipped) != 1 {
			t.Fatalf("listing: %+v, %v", l, err)
		}
	})
}
