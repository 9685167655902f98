package fsservice

import (
	"encoding/base64"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/transport"
)

// The tests of this file mirror the reference checklist 2.10, items
// 105–113, one test per item.

// 105. fs_read returns the whole small text file; offset 1 / limit 1
// returns line2 with truncated:true.
func TestChecklist105ReadWholeAndPage(t *testing.T) {
	dir, _ := fixture(t)
	s := New(dir)
	res := s.Read(bg, &transport.FsReadFrame{Path: "hello.txt"})
	if got := textOf(t, res); got != "line1\nline2\nline3\n" || res.Truncated {
		t.Errorf("whole read = %q truncated=%v, want the file and false", got, res.Truncated)
	}
	res = s.Read(bg, &transport.FsReadFrame{Path: "hello.txt", Offset: num(1), Limit: num(1)})
	if got := textOf(t, res); got != "line2" || !res.Truncated {
		t.Errorf("offset 1 limit 1 = %q truncated=%v, want \"line2\" true", got, res.Truncated)
	}
}

// 106. ../outside.txt → path_escape; an unknown instance →
// unknown_instance (decided by the agent, answered with ErrorResult).
func TestChecklist106EscapeAndUnknownInstance(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "ws")
	writeFile(t, dir, "in.txt", []byte("x"))
	writeFile(t, parent, "outside.txt", []byte("secret"))
	res := New(dir).Read(bg, &transport.FsReadFrame{Path: "../outside.txt"})
	wantCode(t, res, CodePathEscape)
	if !strings.Contains(res.Error.Message, "path escapes root") {
		t.Errorf("message = %q, want it to say the path escapes the root", res.Error.Message)
	}

	req := &transport.FsReadFrame{Header: transport.Header{ID: "r1"}, InstanceID: "nope", Path: "x"}
	res = ErrorResult(req, &Error{Code: CodeUnknownInstance, Message: "no instance nope"})
	wantCode(t, res, CodeUnknownInstance)
	if res.ID != "r1" {
		t.Errorf("id = %q, want the request's r1", res.ID)
	}
}

// 107. A PNG returns mime image/png and base64 of the real bytes.
func TestChecklist107Image(t *testing.T) {
	dir, png := fixture(t)
	res := New(dir).Read(bg, &transport.FsReadFrame{Path: "shot.png"})
	wantCode(t, res, "")
	if res.Mime != "image/png" {
		t.Errorf("mime = %q, want image/png", res.Mime)
	}
	if got, err := base64.StdEncoding.DecodeString(res.Base64); err != nil || string(got) != string(png) {
		t.Errorf("base64 does not decode to the file's bytes (err %v)", err)
	}
	if res.Text != nil {
		t.Errorf("an image answer carries text %q", *res.Text)
	}
}

// 108. fs_list . returns exactly the entries hello.txt, shot.png, src.
func TestChecklist108List(t *testing.T) {
	dir, png := fixture(t)
	res := New(dir).List(bg, &transport.FsListFrame{Path: "."})
	wantCode(t, res, "")
	want := []transport.FsEntry{
		{Name: "hello.txt", Kind: transport.FsFile, Bytes: num(18)},
		{Name: "shot.png", Kind: transport.FsFile, Bytes: num(float64(len(png)))},
		{Name: "src", Kind: transport.FsDir},
	}
	// A directory's size is the filesystem's business; only files are pinned.
	got := res.Entries
	if len(got) == 3 {
		got[2].Bytes = nil
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// 109. fs_grep with glob **/*.ts finds src/app.ts:1:.
func TestChecklist109GrepGlob(t *testing.T) {
	dir, _ := fixture(t)
	res := New(dir).Grep(bg, &transport.FsGrepFrame{Pattern: "app", Glob: "**/*.ts"})
	if got := textOf(t, res); got != "src/app.ts:1:export const app = 1;" {
		t.Errorf("grep = %q, want the one line of src/app.ts", got)
	}
}

// 110. fs_diff stat:true mentions the changed file; the full diff
// contains +CHANGED.
func TestChecklist110Diff(t *testing.T) {
	dir := gitRepo(t)
	writeFile(t, dir, "a.txt", []byte("CHANGED\n"))
	s := New(dir)
	if got := textOf(t, s.Diff(bg, &transport.FsDiffFrame{Stat: true})); !strings.Contains(got, "a.txt") {
		t.Errorf("diff --stat = %q, want it to mention a.txt", got)
	}
	if got := textOf(t, s.Diff(bg, &transport.FsDiffFrame{})); !strings.Contains(got, "+CHANGED") {
		t.Errorf("diff = %q, want +CHANGED", got)
	}
}

// 111. Grep over 500 matching lines returns exactly 200 lines and
// truncated:true.
func TestChecklist111GrepCap(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "many.txt", []byte(strings.Repeat("match me\n", 500)))
	res := New(dir).Grep(bg, &transport.FsGrepFrame{Pattern: "match"})
	got := strings.Split(textOf(t, res), "\n")
	if len(got) != GrepMaxMatches || !res.Truncated {
		t.Fatalf("%d lines truncated=%v, want %d and true", len(got), res.Truncated, GrepMaxMatches)
	}
	if got[199] != "many.txt:200:match me" {
		t.Errorf("last line = %q, want many.txt:200:match me", got[199])
	}
}

// 112. A 200 KiB single-line text read is truncated to ≤ 51,200 bytes with
// truncated:true.
func TestChecklist112LongLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "long.txt", []byte(strings.Repeat("x", 200<<10)))
	res := New(dir).Read(bg, &transport.FsReadFrame{Path: "long.txt"})
	got := textOf(t, res)
	if len(got) != MaxPageBytes || !res.Truncated {
		t.Errorf("%d bytes truncated=%v, want %d and true", len(got), res.Truncated, MaxPageBytes)
	}
}

// 113. fs_diff revParse:true returns a 40-hex HEAD hash.
func TestChecklist113RevParse(t *testing.T) {
	dir := gitRepo(t)
	got := textOf(t, New(dir).Diff(bg, &transport.FsDiffFrame{RevParse: true}))
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(got) {
		t.Errorf("rev-parse = %q, want 40 hex digits", got)
	}
	if head := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD")); got != head {
		t.Errorf("rev-parse = %q, git says %q", got, head)
	}
}
