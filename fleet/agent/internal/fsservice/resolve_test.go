package fsservice

import (
	"os"
	"path/filepath"
	"testing"

	"example.com/pifleet/transport"
)

// escapeWorld is a root with links pointing in and out:
//
//	parent/secret.txt, parent/outdir/deep.txt
//	parent/ws/in.txt, parent/ws/sub/n.txt
//	parent/ws/out     -> ../secret.txt     (file outside)
//	parent/ws/outdir  -> ../outdir         (directory outside)
//	parent/ws/inlink  -> sub/n.txt         (file inside)
//	parent/ws/abslink -> <abs>/secret.txt  (absolute, outside)
//	parent/ws/absin   -> <abs>/ws/in.txt   (absolute, inside)
func escapeWorld(t *testing.T) (parent, ws string) {
	t.Helper()
	parent = t.TempDir()
	ws = filepath.Join(parent, "ws")
	writeFile(t, parent, "secret.txt", []byte("secret"))
	writeFile(t, parent, "outdir/deep.txt", []byte("deep"))
	writeFile(t, ws, "in.txt", []byte("in"))
	writeFile(t, ws, "sub/n.txt", []byte("n"))
	for link, to := range map[string]string{
		"out":     "../secret.txt",
		"outdir":  "../outdir",
		"inlink":  "sub/n.txt",
		"abslink": filepath.Join(parent, "secret.txt"),
		"absin":   filepath.Join(ws, "in.txt"),
	} {
		if err := os.Symlink(to, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	return parent, ws
}

func TestContainment(t *testing.T) {
	parent, ws := escapeWorld(t)
	cases := []struct {
		path string
		code Code
		text string
	}{
		{path: "in.txt", text: "in"},
		{path: "./sub/../in.txt", text: "in"},
		{path: filepath.Join(ws, "in.txt"), text: "in"}, // absolute, inside
		{path: "inlink", text: "n"},                     // symlink staying inside
		{path: "absin", text: "in"},                     // absolute symlink staying inside
		{path: "../secret.txt", code: CodePathEscape},
		{path: filepath.Join(parent, "secret.txt"), code: CodePathEscape}, // absolute, outside
		{path: "/etc/passwd", code: CodePathEscape},
		{path: "out", code: CodePathEscape},                  // symlink to a file outside
		{path: "abslink", code: CodePathEscape},              // absolute symlink outside
		{path: "outdir/deep.txt", code: CodePathEscape},      // through a symlinked dir outside
		{path: "outdir/missing/x.txt", code: CodePathEscape}, // missing tail under an outside link
		{path: "sub/missing.txt", code: CodeNotFound},        // missing tail inside
		{path: "in.txt/x", code: CodeNotFound},               // a file used as a directory
		{path: ".", code: CodeNotAFile},
		{path: "", code: CodeNotAFile}, // the root itself
	}
	s := New(ws)
	for _, c := range cases {
		res := s.Read(bg, &transport.FsReadFrame{Path: c.path})
		if codeOf(res) != c.code {
			t.Errorf("read %q: code %q (%+v), want %q", c.path, codeOf(res), res.Error, c.code)
			continue
		}
		if c.code == "" && (res.Text == nil || *res.Text != c.text) {
			t.Errorf("read %q: text %v, want %q", c.path, res.Text, c.text)
		}
	}
}

// A root that is itself reached through a symlink is realpath'd first, so
// paths inside it are accepted and ".." still cannot leave it.
func TestContainmentSymlinkedRoot(t *testing.T) {
	_, ws := escapeWorld(t)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(ws, alias); err != nil {
		t.Fatal(err)
	}
	s := New(alias)
	if got := textOf(t, s.Read(bg, &transport.FsReadFrame{Path: "in.txt"})); got != "in" {
		t.Errorf("read through an aliased root = %q, want in", got)
	}
	if got := textOf(t, s.Read(bg, &transport.FsReadFrame{Path: filepath.Join(ws, "in.txt")})); got != "in" {
		t.Errorf("absolute path under the root's realpath = %q, want in", got)
	}
	wantCode(t, s.Read(bg, &transport.FsReadFrame{Path: "../secret.txt"}), CodePathEscape)
}

// Every request kind applies the same containment.
func TestContainmentAllRequests(t *testing.T) {
	_, ws := escapeWorld(t)
	s := New(ws)
	wantCode(t, s.List(bg, &transport.FsListFrame{Path: "outdir"}), CodePathEscape)
	wantCode(t, s.List(bg, &transport.FsListFrame{Path: ".."}), CodePathEscape)
	wantCode(t, s.Read(bg, &transport.FsReadFrame{Path: "outdir/deep.txt"}), CodePathEscape)
}

func TestMissingRoot(t *testing.T) {
	s := New(filepath.Join(t.TempDir(), "gone"))
	wantCode(t, s.Read(bg, &transport.FsReadFrame{Path: "x"}), CodeNotFound)
	wantCode(t, s.List(bg, &transport.FsListFrame{Path: "."}), CodeNotFound)
	wantCode(t, s.Grep(bg, &transport.FsGrepFrame{Pattern: "x"}), CodeNotFound)
}

func TestWithin(t *testing.T) {
	cases := []struct {
		root, p string
		want    bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a/bc", false}, // a sibling sharing the prefix
		{"/a/b", "/a", false},
		{"/", "/etc", true},
	}
	for _, c := range cases {
		if got := within(c.root, c.p); got != c.want {
			t.Errorf("within(%q, %q) = %v, want %v", c.root, c.p, got, c.want)
		}
	}
}
