package worktree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var who = Identity{Name: "pifleet test", Email: "test@pifleet.invalid"}

// repo makes a real repository on branch main with one commit of f.txt.
func repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	write(t, filepath.Join(dir, "f.txt"), "one\ntwo\nthree\n")
	git(t, dir, "add", "f.txt")
	git(t, dir, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "first")
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func create(t *testing.T, g Git, r, branch string) Tree {
	t.Helper()
	tr, err := g.Plan(context.Background(), Spec{Cwd: r, Dir: filepath.Join(t.TempDir(), "wt"), Branch: branch})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Create(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestPlanRefusals(t *testing.T) {
	ctx := context.Background()
	g := Git{}
	r := repo(t)
	dir := func() string { return filepath.Join(t.TempDir(), "wt") }
	if _, err := (Git{Bin: "/nonexistent/git"}).Plan(ctx, Spec{Cwd: r, Dir: dir(), Branch: "b"}); code(err) != CodeNoGit {
		t.Errorf("no git: %v", err)
	}
	if _, err := g.Plan(ctx, Spec{Cwd: t.TempDir(), Dir: dir(), Branch: "b"}); code(err) != CodeNotARepo {
		t.Errorf("not a repo: %v", err)
	}
	empty := t.TempDir()
	git(t, empty, "init", "-q")
	if _, err := g.Plan(ctx, Spec{Cwd: empty, Dir: dir(), Branch: "b"}); code(err) != CodeNoCommit {
		t.Errorf("no commit: %v", err)
	}
	write(t, filepath.Join(r, "f.txt"), "dirty\n")
	if _, err := g.Plan(ctx, Spec{Cwd: r, Dir: dir(), Branch: "b"}); code(err) != CodeDirtyTree {
		t.Errorf("dirty: %v", err)
	}
	// A base ref makes a dirty tree irrelevant: nothing of it is used.
	if tr, err := g.Plan(ctx, Spec{Cwd: r, Dir: dir(), Branch: "b", Base: "main"}); err != nil || tr.BaseRef != "main" {
		t.Errorf("dirty with base: %+v %v", tr, err)
	}
	git(t, r, "checkout", "-q", "f.txt")
	git(t, r, "checkout", "-q", "--detach")
	if _, err := g.Plan(ctx, Spec{Cwd: r, Dir: dir(), Branch: "b"}); code(err) != CodeDetached {
		t.Errorf("detached: %v", err)
	}
	git(t, r, "checkout", "-q", "main")
	if _, err := g.Plan(ctx, Spec{Cwd: r, Dir: dir(), Branch: "main"}); code(err) != CodeBranchTaken {
		t.Errorf("branch taken: %v", err)
	}
	if _, err := g.Plan(ctx, Spec{Cwd: r, Dir: dir(), Branch: "b", Base: "nope"}); code(err) != CodeBadBase {
		t.Errorf("bad base: %v", err)
	}
	if _, err := g.Plan(ctx, Spec{Cwd: r, Dir: dir(), Branch: "bad..name"}); err == nil {
		t.Error("bad branch name accepted")
	}
}

// The worker's tree is its own: the user's tree and branch are untouched
// until a delivery; stat and diff include new files; commit, patch,
// merge into the checked-out branch, and removal leave git clean.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	g := Git{}
	r := repo(t)
	if err := os.Mkdir(filepath.Join(r, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := g.Plan(ctx, Spec{Cwd: filepath.Join(r, "sub"), Dir: filepath.Join(t.TempDir(), "wt"), Branch: "pifleet/t-1-fix"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Create(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if tr.Cwd != filepath.Join(tr.Dir, "sub") || tr.BaseRef != "main" {
		t.Errorf("tree %+v", tr)
	}
	write(t, filepath.Join(tr.Dir, "f.txt"), "one\nTWO\nthree\n")
	write(t, filepath.Join(tr.Dir, "new.txt"), "fresh\n")
	st, err := g.Stat(ctx, tr)
	if err != nil || st != (Stat{Files: 2, Insertions: 2, Deletions: 1}) {
		t.Errorf("stat %+v %v", st, err)
	}
	d, err := g.Diff(ctx, tr, false)
	if err != nil || !strings.Contains(d, "+TWO") || !strings.Contains(d, "+fresh") {
		t.Errorf("diff %q %v", d, err)
	}
	if s := git(t, tr.Dir, "status", "--porcelain"); !strings.Contains(s, "?? new.txt") {
		t.Errorf("the snapshot touched the worker's index: %q", s)
	}
	if read(t, filepath.Join(r, "f.txt")) != "one\ntwo\nthree\n" {
		t.Error("the user's tree changed")
	}
	head, err := g.Commit(ctx, tr, "task t-1: fix", who)
	if err != nil {
		t.Fatal(err)
	}
	if log := git(t, r, "log", "--format=%an <%ae> %s", "-1", "pifleet/t-1-fix"); log != "pifleet test <test@pifleet.invalid> task t-1: fix\n" {
		t.Errorf("commit %q", log)
	}
	if again, err := g.Commit(ctx, tr, "nothing", who); err != nil || again != head {
		t.Errorf("empty commit: %s %v", again, err)
	}
	patch, err := g.FormatPatch(ctx, tr)
	if err != nil || !strings.HasPrefix(patch, "From "+head) || !strings.Contains(patch, "Subject: [PATCH] task t-1: fix") {
		t.Errorf("patch %q %v", patch, err)
	}
	// The patch applies to the base with git am.
	other := t.TempDir()
	git(t, other, "clone", "-q", r, ".")
	pf := filepath.Join(t.TempDir(), "p.patch")
	write(t, pf, patch)
	git(t, other, "-c", "user.name=u", "-c", "user.email=u@x", "am", "-q", pf)
	if read(t, filepath.Join(other, "new.txt")) != "fresh\n" {
		t.Error("patch did not apply")
	}
	// Merge into main, checked out (clean) in the user's tree.
	m, err := g.Merge(ctx, tr, "main", filepath.Join(t.TempDir(), "scratch"), "Merge task t-1", who)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(git(t, r, "rev-parse", "main")); got != m || read(t, filepath.Join(r, "new.txt")) != "fresh\n" {
		t.Errorf("merge: main %s, want %s", got, m)
	}
	if err := g.Remove(ctx, tr, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tr.Dir); !os.IsNotExist(err) {
		t.Error("worktree left")
	}
	if l := git(t, r, "worktree", "list", "--porcelain"); strings.Count(l, "worktree ") != 1 {
		t.Errorf("worktrees:\n%s", l)
	}
	if b := git(t, r, "branch", "--list", "pifleet/*"); b != "" {
		t.Errorf("branch left: %q", b)
	}
}

// A merge that conflicts changes nothing and names the files; a merge
// into a branch nobody has checked out only moves the ref; a dirty
// target tree is refused.
func TestMergeConflictAndScratch(t *testing.T) {
	ctx := context.Background()
	g := Git{}
	r := repo(t)
	a := create(t, g, r, "pifleet/a")
	b := create(t, g, r, "pifleet/b")
	write(t, filepath.Join(a.Dir, "f.txt"), "A\n")
	write(t, filepath.Join(b.Dir, "f.txt"), "B\n")
	if _, err := g.Commit(ctx, a, "a", who); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Commit(ctx, b, "b", who); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Merge(ctx, a, "main", filepath.Join(t.TempDir(), "s"), "merge a", who); err != nil {
		t.Fatal(err)
	}
	mainHead := git(t, r, "rev-parse", "main")
	_, err := g.Merge(ctx, b, "main", filepath.Join(t.TempDir(), "s"), "merge b", who)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeConflict || len(e.Files) != 1 || e.Files[0] != "f.txt" {
		t.Fatalf("conflict: %v", err)
	}
	if git(t, r, "rev-parse", "main") != mainHead || git(t, r, "status", "--porcelain") != "" {
		t.Error("a failed merge left changes")
	}
	// Into a branch that is not checked out: only the ref moves.
	git(t, r, "branch", "release", mainHead[:40])
	c := create(t, g, r, "pifleet/c")
	write(t, filepath.Join(c.Dir, "g.txt"), "g\n")
	if _, err := g.Commit(ctx, c, "c", who); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(t.TempDir(), "s")
	if _, err := g.Merge(ctx, c, "release", scratch, "merge c", who); err != nil {
		t.Fatal(err)
	}
	if out := git(t, r, "show", "release:g.txt"); out != "g\n" {
		t.Errorf("release lacks g.txt: %q", out)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Error("scratch worktree left")
	}
	write(t, filepath.Join(r, "f.txt"), "user edits\n")
	if _, err := g.Merge(ctx, c, "main", scratch, "merge c", who); code(err) != CodeTargetDirty {
		t.Errorf("dirty target: %v", err)
	}
	if _, err := g.Merge(ctx, c, "", scratch, "m", who); code(err) != CodeNoTarget {
		t.Errorf("no target: %v", err)
	}
}

func TestParseNumstat(t *testing.T) {
	s := parseNumstat("1\t2\ta.txt\n-\t-\tbin.png\n10\t0\tdir/b.go\nnoise\n")
	if s != (Stat{Files: 3, Insertions: 11, Deletions: 2}) {
		t.Errorf("%+v", s)
	}
}

func FuzzParseNumstat(f *testing.F) {
	for _, s := range []string{"1\t2\ta\n", "-\t-\tbin\n", "x\ty\tz\n", "\t\t\n", "3\t4\tp\tq\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st := parseNumstat(s)
		if st.Files < 0 || st.Files > strings.Count(s, "\t") || st.Insertions < 0 && !strings.Contains(s, "-") {
			t.Fatalf("%q: %+v", s, st)
		}
	})
}
