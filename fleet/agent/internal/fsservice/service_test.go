package fsservice

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

	"example.com/pifleet/transport"
)

func TestList(t *testing.T) {
	_, ws := escapeWorld(t)
	if err := os.Mkdir(filepath.Join(ws, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(ws)
	res := s.List(bg, &transport.FsListFrame{Path: "."})
	wantCode(t, res, "")
	type entry struct {
		Name     string
		Kind     transport.FsEntryKind
		HasBytes bool
	}
	var got []entry
	for _, e := range res.Entries {
		got = append(got, entry{e.Name, e.Kind, e.Bytes != nil})
	}
	want := []entry{
		{"absin", transport.FsFile, true},    // absolute link in: a size
		{"abslink", transport.FsFile, false}, // link out: kind file, no size
		{"empty", transport.FsDir, true},
		{"in.txt", transport.FsFile, true},
		{"inlink", transport.FsFile, true}, // link in: a file, with its target's size
		{"out", transport.FsFile, false},
		{"outdir", transport.FsFile, false}, // a symlink to a directory is a file
		{"sub", transport.FsDir, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	for _, e := range res.Entries {
		if e.Name == "inlink" && *e.Bytes != 1 {
			t.Errorf("inlink size = %v, want its target's 1 byte", *e.Bytes)
		}
	}

	empty := s.List(bg, &transport.FsListFrame{Path: "empty"})
	wantCode(t, empty, "")
	if empty.Entries == nil || len(empty.Entries) != 0 {
		t.Errorf("empty directory entries = %#v, want a non-nil empty slice", empty.Entries)
	}
	wire, err := transport.MarshalFrame(empty)
	if err != nil || !strings.Contains(string(wire), `"entries":[]`) {
		t.Errorf("empty listing on the wire = %s (%v), want entries:[]", wire, err)
	}

	wantCode(t, s.List(bg, &transport.FsListFrame{Path: "in.txt"}), CodeNotFound)
	wantCode(t, s.List(bg, &transport.FsListFrame{Path: "nope"}), CodeNotFound)
}

func TestGrep(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.txt", []byte("alpha\nneedle one\n\nneedle two"))
	writeFile(t, dir, "sub/b.go", []byte("package b // needle\n"))
	writeFile(t, dir, ".git/config", []byte("needle\n"))
	writeFile(t, dir, "node_modules/x/y.js", []byte("needle\n"))
	writeFile(t, dir, "deep/node_modules/z.js", []byte("needle\n"))
	writeFile(t, dir, ".fleet-worktrees/t1/c.txt", []byte("needle\n"))
	writeFile(t, dir, "bin.dat", []byte("needle\x00binary"))
	writeFile(t, dir, "big.txt", []byte("needle\n"+strings.Repeat("x", GrepMaxFileBytes)))
	writeFile(t, dir, "long.txt", []byte("needle"+strings.Repeat("é", 400)))
	outside := writeFile(t, t.TempDir(), "o.txt", []byte("needle\n"))
	if err := os.Symlink(outside, filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	s := New(dir)

	got := strings.Split(textOf(t, s.Grep(bg, &transport.FsGrepFrame{Pattern: "needle"})), "\n")
	want := []string{
		"a.txt:2:needle one",
		"a.txt:4:needle two",
		"long.txt:1:needle" + strings.Repeat("é", GrepMaxLineChars-len("needle")),
		"sub/b.go:1:package b // needle",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grep (-want +got):\n%s", diff)
	}

	// Line numbers count the empty lines, and the empty last piece after a
	// final LF is a line too.
	if got := textOf(t, s.Grep(bg, &transport.FsGrepFrame{Pattern: "^$", Glob: "*.go"})); got != "" {
		t.Errorf("grep under *.go = %q; * stays in one segment, so want nothing", got)
	}
	got = strings.Split(textOf(t, s.Grep(bg, &transport.FsGrepFrame{Pattern: "^$", Glob: "**/*.go"})), "\n")
	if want := []string{"sub/b.go:2:"}; !cmp.Equal(want, got) {
		t.Errorf("empty-line grep under **/*.go = %q, want %q", got, want)
	}

	res := s.Grep(bg, &transport.FsGrepFrame{Pattern: "nomatch"})
	if got := textOf(t, res); got != "" || res.Truncated {
		t.Errorf("no match = %q truncated=%v, want empty and false", got, res.Truncated)
	}

	res = s.Grep(bg, &transport.FsGrepFrame{Pattern: `(a`})
	wantCode(t, res, CodeBadPattern)
	wantCode(t, s.Grep(bg, &transport.FsGrepFrame{Pattern: `(?<=a)b`}), CodeBadPattern) // JS lookbehind: not RE2
}

// Exactly 200 matches is a complete answer: truncated only when more exist.
func TestGrepExactCap(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.txt", []byte(strings.Repeat("hit\n", GrepMaxMatches)))
	res := New(dir).Grep(bg, &transport.FsGrepFrame{Pattern: "hit"})
	if n := len(strings.Split(textOf(t, res), "\n")); n != GrepMaxMatches || res.Truncated {
		t.Errorf("%d lines truncated=%v, want %d false", n, res.Truncated, GrepMaxMatches)
	}
}

// 200 matches with long paths and lines would overflow a frame: the answer
// stops at MaxGrepBytes, on a whole line, and says it is truncated.
func TestGrepAnswerCap(t *testing.T) {
	dir := t.TempDir()
	var deep []string
	for i := range 7 {
		deep = append(deep, strings.Repeat(string(rune('a'+i)), 250))
	}
	const files = 190 // fewer than GrepMaxMatches: only the byte cap can stop it
	for i := range files {
		name := fmt.Sprintf("%03d%s.txt", i, strings.Repeat("f", 240))
		writeFile(t, dir, strings.Join(deep, "/")+"/"+name, []byte(strings.Repeat("界", 400)))
	}
	res := New(dir).Grep(bg, &transport.FsGrepFrame{Pattern: "界"})
	got := textOf(t, res)
	lines := strings.Split(got, "\n")
	if len(got) > MaxGrepBytes || len(lines) >= files || !res.Truncated {
		t.Fatalf("answer %d bytes, %d lines, truncated=%v; want ≤ %d bytes, < %d lines, true", len(got), len(lines), res.Truncated, MaxGrepBytes, files)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, strings.Repeat("界", GrepMaxLineChars)) {
			t.Fatalf("a line was cut: %q", l[len(l)-20:])
		}
	}
}

func TestGrepCanceled(t *testing.T) {
	dir, _ := fixture(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	wantCode(t, New(dir).Grep(ctx, &transport.FsGrepFrame{Pattern: "x"}), CodeCanceled)
}

func TestDiffOptions(t *testing.T) {
	dir := gitRepo(t)
	s := New(dir)
	writeFile(t, dir, "a.txt", []byte("staged\n"))
	git(t, dir, "add", "a.txt")
	writeFile(t, dir, "a.txt", []byte("worktree\n"))

	if got := textOf(t, s.Diff(bg, &transport.FsDiffFrame{Staged: true})); !strings.Contains(got, "+staged") || strings.Contains(got, "+worktree") {
		t.Errorf("staged diff = %q, want only the staged change", got)
	}
	if got := textOf(t, s.Diff(bg, &transport.FsDiffFrame{})); !strings.Contains(got, "+worktree") || !strings.Contains(got, "-staged") {
		t.Errorf("worktree diff = %q, want index → worktree", got)
	}
	if got := textOf(t, s.Diff(bg, &transport.FsDiffFrame{Ref: "HEAD"})); !strings.Contains(got, "-original") || !strings.Contains(got, "+worktree") {
		t.Errorf("diff HEAD = %q, want HEAD → worktree", got)
	}

	// A ref must never be read as an option, nor reach git.
	for _, ref := range []string{"--output=/tmp/pwned", "-p", "--", "-"} {
		res := s.Diff(bg, &transport.FsDiffFrame{Ref: ref})
		wantCode(t, res, CodeGitFailed)
		if !strings.Contains(res.Error.Message, "must not start with") {
			t.Errorf("ref %q: message %q", ref, res.Error.Message)
		}
	}

	res := s.Diff(bg, &transport.FsDiffFrame{Ref: "no-such-ref"})
	wantCode(t, res, CodeGitFailed)
	if !strings.Contains(res.Error.Message, "no-such-ref") {
		t.Errorf("git_failed message %q does not carry git's stderr", res.Error.Message)
	}
}

func TestDiffNotARepo(t *testing.T) {
	needGit(t)
	dir := t.TempDir()
	res := New(dir, WithGit("git")).Diff(bg, &transport.FsDiffFrame{RevParse: true})
	wantCode(t, res, CodeGitFailed)
	res = New(dir, WithGit(filepath.Join(dir, "no-git"))).Diff(bg, &transport.FsDiffFrame{})
	wantCode(t, res, CodeGitFailed)
}

// A diff larger than a page comes back cut at a rune boundary, truncated,
// and git is stopped rather than drained.
func TestDiffTruncated(t *testing.T) {
	dir := gitRepo(t)
	writeFile(t, dir, "a.txt", []byte(strings.Repeat("ünïcödé line\n", 20_000)))
	res := New(dir).Diff(bg, &transport.FsDiffFrame{})
	got := textOf(t, res)
	if len(got) > MaxPageBytes || len(got) < MaxPageBytes-utf8.UTFMax || !res.Truncated || !utf8.ValidString(got) {
		t.Errorf("diff page %d bytes truncated=%v valid=%v", len(got), res.Truncated, utf8.ValidString(got))
	}
}

func TestDiffCanceled(t *testing.T) {
	dir := gitRepo(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	wantCode(t, New(dir).Diff(ctx, &transport.FsDiffFrame{}), CodeCanceled)
}

func TestCutUTF8(t *testing.T) {
	cases := []struct {
		in    string
		limit int
		want  string
		cut   bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"aé", 2, "a", true},
		{"a\xffb", 10, "a\uFFFDb", false},
		{"\xff\xff", 4, "\uFFFD", true},
	}
	for _, c := range cases {
		if got, cut := cutUTF8([]byte(c.in), c.limit); got != c.want || cut != c.cut {
			t.Errorf("cutUTF8(%q, %d) = %q %v, want %q %v", c.in, c.limit, got, cut, c.want, c.cut)
		}
	}
}

// AC-3.4a: with access off every request is refused with fs_disabled,
// before anything on disk is looked at.
func TestAccessOff(t *testing.T) {
	dir, _ := fixture(t)
	s := New(dir, WithAccess(AccessOff))
	reqs := []transport.Frame{
		&transport.FsReadFrame{Header: transport.Header{ID: "1"}, Path: "hello.txt"},
		&transport.FsListFrame{Header: transport.Header{ID: "2"}, Path: "."},
		&transport.FsGrepFrame{Header: transport.Header{ID: "3"}, Pattern: "x"},
		&transport.FsDiffFrame{Header: transport.Header{ID: "4"}, RevParse: true},
	}
	for _, req := range reqs {
		res, ok := s.Handle(bg, req)
		if !ok {
			t.Fatalf("Handle(%s) not handled", req.FrameType())
		}
		wantCode(t, res, CodeDisabled)
		if res.ID != req.Envelope().ID || res.Text != nil || res.Entries != nil {
			t.Errorf("%s: %+v, want only the error and the echoed id", req.FrameType(), res)
		}
	}
}

func TestUnknownAccessDenies(t *testing.T) {
	dir, _ := fixture(t)
	wantCode(t, New(dir, WithAccess("readwrite")).Read(bg, &transport.FsReadFrame{Path: "hello.txt"}), CodeDisabled)
}

func TestParseAccess(t *testing.T) {
	for in, want := range map[string]Access{"": AccessWorkspace, "workspace": AccessWorkspace, "off": AccessOff} {
		if got, err := ParseAccess(in); err != nil || got != want {
			t.Errorf("ParseAccess(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseAccess("readwrite"); !errors.Is(err, ErrBadAccess) {
		t.Errorf("ParseAccess(readwrite) error = %v, want ErrBadAccess", err)
	}
}

func TestHandle(t *testing.T) {
	dir, _ := fixture(t)
	s := New(dir)
	req := &transport.FsReadFrame{Header: transport.Header{ID: "q", TraceID: "tr"}, Path: "hello.txt"}
	res, ok := s.Handle(bg, req)
	if !ok || res.ID != "q" || res.TraceID != "tr" || !res.Done {
		t.Errorf("Handle = %+v, %v; want done with id and traceId echoed", res, ok)
	}
	if res, ok := s.Handle(bg, &transport.ListFrame{}); ok || res != nil {
		t.Errorf("Handle(list) = %v, %v; want nil, false", res, ok)
	}
}

// Every answer is a schema-valid fs_result: it survives encoding and the
// decoder's checks.
func TestAnswersAreValidFrames(t *testing.T) {
	dir, _ := fixture(t)
	s := New(dir)
	for _, res := range []*transport.FsResultFrame{
		s.Read(bg, &transport.FsReadFrame{Path: "hello.txt"}),
		s.Read(bg, &transport.FsReadFrame{Path: "shot.png"}),
		s.Read(bg, &transport.FsReadFrame{Path: "../x"}),
		s.List(bg, &transport.FsListFrame{Path: "."}),
		s.Grep(bg, &transport.FsGrepFrame{Pattern: "line"}),
	} {
		wire, err := transport.MarshalFrame(res)
		if err != nil {
			t.Fatalf("encode %+v: %v", res, err)
		}
		back, err := transport.ParseFrame(wire[:len(wire)-1])
		if err != nil {
			t.Fatalf("decode %s: %v", wire, err)
		}
		if diff := cmp.Diff(res, back); diff != "" {
			t.Errorf("round trip (-sent +received):\n%s", diff)
		}
	}
}
