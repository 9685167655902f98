package fsservice

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"example.com/pifleet/transport"
)

// writeFile creates dir/rel (and its parents) with content.
func writeFile(t testing.TB, dir, rel string, content []byte) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pngBytes returns a real 2×2 PNG image.
func pngBytes(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fixture builds the workspace of checklist 105–109: hello.txt, shot.png
// and src/app.ts, nothing else.
func fixture(t testing.TB) (dir string, png []byte) {
	t.Helper()
	dir = t.TempDir()
	png = pngBytes(t)
	writeFile(t, dir, "hello.txt", []byte("line1\nline2\nline3\n"))
	writeFile(t, dir, "shot.png", png)
	writeFile(t, dir, "src/app.ts", []byte("export const app = 1;\n"))
	return dir, png
}

// num returns a pointer to a wire number.
func num(v float64) *float64 { return &v }

// codeOf returns the result's error code, "" on success.
func codeOf(res *transport.FsResultFrame) Code {
	if res.Error == nil {
		return ""
	}
	return Code(res.Error.Code)
}

// wantCode fails unless res carries code, and checks the error is
// errors.Is-able through ResultError.
func wantCode(t *testing.T, res *transport.FsResultFrame, code Code) {
	t.Helper()
	if !res.Done {
		t.Errorf("done = false, want true")
	}
	if codeOf(res) != code {
		t.Fatalf("error code = %q (%+v), want %q", codeOf(res), res.Error, code)
	}
	if code != "" && !errors.Is(ResultError(res), code) {
		t.Errorf("errors.Is(ResultError(res), %q) = false", code)
	}
}

// textOf returns the result's text, failing when there is none.
func textOf(t *testing.T, res *transport.FsResultFrame) string {
	t.Helper()
	wantCode(t, res, "")
	if res.Text == nil {
		t.Fatalf("text absent in %+v", res)
	}
	return *res.Text
}

// needGit skips a test when no git binary is installed.
func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found in PATH: fs_diff tests need the real git binary")
	}
}

// git runs a git command in dir with an isolated configuration.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// gitRepo returns a repository with one commit of a.txt.
func gitRepo(t testing.TB) string {
	t.Helper()
	needGit(t)
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	writeFile(t, dir, "a.txt", []byte("original\n"))
	git(t, dir, "add", "a.txt")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

var bg = context.Background()
