package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func listFixtures(t *testing.T) (string, []SessionInfo) {
	t.Helper()
	root := copyAgentRoot(t)
	l, err := NewLister(root).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return root, l.Sessions
}

func TestSearchFixtures(t *testing.T) {
	_, sessions := listFixtures(t)
	ctx := context.Background()
	tests := []struct {
		query   string
		ids     []string // expected hits, newest first
		snippet string   // a substring of the first hit's snippet
	}{
		// Case-insensitive; one hit per file; newest first.
		{"FAUX-1", []string{"0196a1b2-0000-7000-8000-000000000003", "0196a1b2-0000-7000-8000-000000000002", "0196a1b2-0000-7000-8000-000000000001"}, `"modelId":"faux-1"`},
		// Whitespace runs collapse in the snippet.
		// (The \t in the file is a JSON escape, two characters.)
		{"kelvin   sign", []string{"0196a1b2-0000-7000-8000-000000000003"}, `Why is the Kelvin sign\tweird?`},
		// Unicode simple folding: "k" finds the Kelvin sign U+212A.
		{"sign k folds", []string{"0196a1b2-0000-7000-8000-000000000003"}, "sign \u212a folds to k"},
		{"STRAßE", []string{"0196a1b2-0000-7000-8000-000000000003"}, "Straße vs"},
		// Matches on the raw JSONL, whatever the field.
		{`"customType":"pifleet-note"`, []string{"0196a1b2-0000-7000-8000-000000000002"}, "pifleet-note"},
		// The torn last line is text in the file too.
		{"I will ke", []string{"0196a1b2-0000-7000-8000-000000000002"}, "Understood, I will ke"},
		{"nowhere to be found", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			res, err := Search(ctx, sessions, tc.query, SearchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range res.Hits {
				got = append(got, h.SessionID)
			}
			if d := cmp.Diff(tc.ids, got); d != "" {
				t.Fatalf("hits (-want +got):\n%s", d)
			}
			if len(res.Hits) > 0 && !strings.Contains(res.Hits[0].Snippet, tc.snippet) {
				t.Errorf("snippet %q lacks %q", res.Hits[0].Snippet, tc.snippet)
			}
			if res.Hits == nil {
				t.Error("nil hits (encodes as null)")
			}
		})
	}
}

func TestSearchOptions(t *testing.T) {
	_, sessions := listFixtures(t)
	ctx := context.Background()
	res, err := Search(ctx, sessions, "faux", SearchOptions{MaxHits: 2})
	if err != nil || len(res.Hits) != 2 || res.Hits[0].SessionID != sessions[0].SessionID {
		t.Errorf("MaxHits 2: %+v, %v", res.Hits, err)
	}
	res, err = Search(ctx, sessions, "faux", SearchOptions{Cwd: "/work/api"})
	if err != nil || len(res.Hits) != 2 {
		t.Errorf("cwd filter: %+v, %v", res.Hits, err)
	}
	res, err = Search(ctx, sessions, "faux", SearchOptions{MaxFileBytes: 2000})
	if err != nil || len(res.Hits) != 1 || len(res.TooLarge) != 2 {
		t.Errorf("size limit: hits %+v, too large %v, %v", res.Hits, res.TooLarge, err)
	}
	if _, err := Search(ctx, sessions, " \t", SearchOptions{}); !errors.Is(err, ErrEmptyQuery) {
		t.Errorf("blank query: %v", err)
	}
	gone := append([]SessionInfo{{SessionID: "gone", Path: filepath.Join(t.TempDir(), "gone.jsonl")}}, sessions...)
	res, err = Search(ctx, gone, "faux", SearchOptions{})
	if err != nil || len(res.Failed) != 1 || len(res.Hits) != 3 {
		t.Errorf("vanished file: failed %v, hits %d, %v", res.Failed, len(res.Hits), err)
	}
}

func TestSnippetRadius(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	before := strings.Repeat("é", 100)
	after := strings.Repeat("ü", 100)
	writeFile(t, path, before+"NEEDLE"+after+"\n")
	res, err := Search(context.Background(), []SessionInfo{{SessionID: "s", Path: path}}, "needle", SearchOptions{SnippetRadius: 80})
	if err != nil || len(res.Hits) != 1 {
		t.Fatal(res, err)
	}
	want := strings.Repeat("é", 80) + "NEEDLE" + strings.Repeat("ü", 80)
	if res.Hits[0].Snippet != want {
		t.Errorf("snippet %q, want 80 runes either side", res.Hits[0].Snippet)
	}
}

// TestSearchAcrossChunkBoundaries puts the match everywhere around the
// boundaries of the chunks a file is read in.
func TestSearchAcrossChunkBoundaries(t *testing.T) {
	dir := t.TempDir()
	for _, at := range []int{0, searchChunk - 7, searchChunk - 3, searchChunk, searchChunk + 1, 2*searchChunk - 5, 3*searchChunk + 100} {
		path := filepath.Join(dir, fmt.Sprint(at, ".jsonl"))
		body := []byte(strings.Repeat("a b\n", (3*searchChunk+400)/4))
		copy(body[at:], "Needle-ü-Xyz")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Search(context.Background(), []SessionInfo{{SessionID: "s", Path: path}}, "needle-Ü-xYZ", SearchOptions{})
		if err != nil || len(res.Hits) != 1 {
			t.Fatalf("match at %d: %+v, %v", at, res, err)
		}
		snip := res.Hits[0].Snippet
		if !strings.Contains(snip, "Needle-ü-Xyz") || utf8.RuneCountInString(snip) < 80 {
			t.Errorf("match at %d: snippet %q", at, snip)
		}
	}
}

func TestSearchCancelled(t *testing.T) {
	_, sessions := listFixtures(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Search(ctx, sessions, "faux", SearchOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled search: %v", err)
	}
}

// naiveFind is the reference: try every rune boundary, compare rune by rune.
func naiveFind(text []byte, query string) (int, int, bool) {
	q := []rune(strings.ToValidUTF8(query, "\uFFFD"))
	for start := 0; start < len(text); start++ {
		pos, ok := start, true
		for _, want := range q {
			if pos >= len(text) {
				ok = false
				break
			}
			r, size := utf8.DecodeRune(text[pos:])
			if invalid(r, size) || !foldEqual(r, want) {
				ok = false
				break
			}
			pos += size
		}
		if ok && len(q) > 0 {
			return start, pos, true
		}
	}
	return 0, 0, false
}

func TestMatcherAgreesWithNaive(t *testing.T) {
	texts := []string{
		`{"type":"message","content":"Hello, World"}`,
		"ſecret KELVIN \u212aelvin straße STRASSE",
		"aaaaaaaaab", "xxXXxxXX", "", "\xff\xfeabc",
	}
	queries := []string{"world", "kelvin", "secret", "s", "aab", "XXX", "é", "\xff", "straSSe", "b"}
	for _, text := range texts {
		for _, q := range queries {
			m := newMatcher(q)
			_, _, ok := m.find([]byte(text))
			_, _, want := naiveFind([]byte(text), q)
			if ok != want {
				t.Errorf("find(%q in %q) = %v, naive %v", q, text, ok, want)
			}
		}
	}
}
