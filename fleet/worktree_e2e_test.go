//go:build unix

package fleet_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "f.txt")
	gitIn(t, dir, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "first")
	return dir
}

// Through the SDK: isolated workers, the reviewer's view (the report's
// branch, base and diff stat; the task's diff against its base) and
// delivery on accept: a merge, then a conflicting merge that leaves the
// task under review, then a discard.
func TestIsolatedTasksThroughTheFleet(t *testing.T) {
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, _ := startAgentWith(t, pitest.Scripted, reg, nil)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	ctx := t.Context()
	repo := newRepo(t)
	base := strings.TrimSpace(gitIn(t, repo, "rev-parse", "HEAD"))

	spawnIsolated := func() *fleet.Instance {
		t.Helper()
		in, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: "worker-01", Cwd: repo, Bundle: "plain", Isolation: &fleet.Isolation{}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.Stop(context.Background()) })
		return in
	}
	a, b := spawnIsolated(), spawnIsolated()
	wa, ok := a.Worktree()
	if !ok || wa.Repo != repo && !strings.HasSuffix(wa.Repo, filepath.Base(repo)) || wa.Base != base || wa.BaseRef != "main" {
		t.Fatalf("worktree %+v %v", wa, ok)
	}
	ta, err := a.Submit(ctx, "write: f.txt from a\nsay: done", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ra := tf.report(t)
	tb, err := b.Submit(ctx, "write: f.txt from b\nsay: done", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb := tf.report(t)
	if ra.TaskID != ta.ID() || ra.Worktree == nil || ra.Worktree.Base != base || ra.Worktree.Files != 1 ||
		!strings.HasPrefix(ra.Worktree.Branch, "pifleet/"+ta.ID()+"-write-f-txt-from-a") {
		t.Errorf("report %+v worktree %+v", ra, ra.Worktree)
	}
	if rb.Worktree == nil || rb.Worktree.Branch == ra.Worktree.Branch {
		t.Errorf("report b %+v", rb.Worktree)
	}
	d, err := ta.Diff(ctx, false)
	if err != nil || d.Text == nil || !strings.Contains(*d.Text, "+from a") || !strings.Contains(*d.Text, "-one") {
		t.Errorf("diff %+v %v", d, err)
	}
	if info := ta.Info(); info.LastDone == nil || info.LastDone.Worktree == nil {
		t.Errorf("the task record lacks the diff stat: %+v", info.LastDone)
	}

	del, err := ta.Deliver(ctx, fleet.DeliverOptions{Mode: transport.DeliverMerge})
	if err != nil {
		t.Fatal(err)
	}
	if del.Target != "main" || strings.TrimSpace(gitIn(t, repo, "rev-parse", "main")) != del.Commit {
		t.Errorf("merge %+v", del)
	}
	if info := ta.Info(); info.Delivery == nil || info.Delivery.Commit != del.Commit {
		t.Errorf("delivery not recorded: %+v", info.Delivery)
	}
	if err := ta.Accept(ctx, transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wa.Path); !os.IsNotExist(err) {
		t.Error("the accepted task's worktree is still there")
	}

	_, err = tb.Deliver(ctx, fleet.DeliverOptions{Mode: transport.DeliverMerge})
	var de *fleet.DeliveryError
	if !errors.Is(err, fleet.ErrMergeConflict) || !errors.As(err, &de) || !strings.Contains(de.Message, "f.txt") {
		t.Fatalf("conflicting merge: %v", err)
	}
	if st := tb.Info().State; st != fleet.TaskVerifying && st != fleet.TaskAwaitingReview {
		t.Errorf("after the conflict the task is %s", st)
	}
	if _, err := tb.Reject(ctx, "rebase on main"); err != nil { // the worktree stays for the revision
		t.Fatal(err)
	}
	tf.report(t)
	wb, _ := b.Worktree()
	if wb.Branch != rb.Worktree.Branch {
		t.Errorf("instance branch %s, task branch %s", wb.Branch, rb.Worktree.Branch)
	}
	if _, err := os.Stat(wb.Path); err != nil {
		t.Errorf("the rejected task's worktree: %v", err)
	}
	if err := tb.Accept(ctx, transport.DispositionStop); err != nil { // nothing delivered: discarded
		t.Fatal(err)
	}
	if wts := gitIn(t, repo, "worktree", "list"); strings.Count(wts, "\n") != 1 {
		t.Errorf("worktrees left:\n%s", wts)
	}
	if br := gitIn(t, repo, "branch", "--list", wb.Branch); br != "" {
		t.Errorf("the discarded branch is still there: %q", br)
	}
}

// A task spawned from a baseline session can be isolated too: the clone
// of the baseline runs in a worktree of the baseline's repository.
func TestIsolatedSpawnFromBaseline(t *testing.T) {
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, cwd := startAgent(t, reg)
	gitRepo(t, cwd)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	ctx := t.Context()
	if _, err := tf.CreateBaseline(ctx, fleet.BaselineOptions{Spawn: fleet.SpawnOptions{Agent: "worker-01", Cwd: cwd, Bundle: "plain"},
		Prompt: "say: primed", Repo: "api"}); err != nil {
		t.Fatal(err)
	}
	in, err := tf.Spawn(ctx, fleet.SpawnOptions{FromSession: "baseline:api", Isolation: &fleet.Isolation{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Stop(context.Background()) })
	w, ok := in.Worktree()
	if !ok || w.BaseRef != "main" || in.Origin() == nil {
		t.Fatalf("worktree %+v %v origin %+v", w, ok, in.Origin())
	}
	task, err := in.Submit(ctx, "write: README changed by the task\nsay: ok", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := tf.report(t)
	if r.TaskID != task.ID() || r.Worktree == nil || r.Worktree.Files != 1 {
		t.Fatalf("report %+v %+v", r, r.Worktree)
	}
	if b, _ := os.ReadFile(filepath.Join(cwd, "README")); string(b) != "repo\n" {
		t.Errorf("the baseline's tree changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Path, "README")); string(b) != "changed by the task" {
		t.Errorf("the worktree's README: %q", b)
	}
}
