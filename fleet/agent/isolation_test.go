//go:build unix

package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/transport"
)

// gitRepo makes a real repository on main with f.txt committed.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	runGit(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, dir, "add", "f.txt")
	runGit(t, dir, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "first")
	return dir
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func isolatedSpawn(mod func(*transport.SpawnFrame)) func(*transport.SpawnFrame) {
	return func(f *transport.SpawnFrame) {
		f.Isolation = &transport.Isolation{Mode: transport.IsolationWorktree}
		if mod != nil {
			mod(f)
		}
	}
}

// worktreesOf lists git's worktrees of repo.
func worktreesOf(t *testing.T, repo string) []string {
	var out []string
	for l := range strings.SplitSeq(runGit(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			out = append(out, p)
		}
	}
	return out
}

// Ten isolated workers on one repository change the same file: each in
// its own worktree on its own branch (named after its task), none sees
// another's change, the user's tree and index are untouched, and each
// task_done carries branch, base and diff stat.
func TestTenIsolatedWorkersNeverCollide(t *testing.T) {
	h := newHarness(t, hopts{})
	repo := gitRepo(t)
	base := strings.TrimSpace(runGit(t, repo, "rev-parse", "HEAD"))
	c := h.dial(t)
	c.hello()
	const n = 10
	for i := range n {
		f := &transport.SpawnFrame{Cwd: repo, Bundle: "default", Isolation: &transport.Isolation{Mode: transport.IsolationWorktree}}
		f.ID = fmt.Sprintf("s%d", i)
		c.send(f)
	}
	insts := make([]transport.InstanceInfo, n)
	for range n { // answers come in any order
		ans := c.next(func(f transport.Frame) bool {
			_, a := f.(*transport.SpawnedFrame)
			_, b := f.(*transport.SpawnErrorFrame)
			return a || b
		}, "a spawn's answer")
		sp, ok := ans.(*transport.SpawnedFrame)
		if !ok {
			t.Fatalf("spawn refused: %+v", ans)
		}
		var i int
		fmt.Sscanf(sp.ID, "s%d", &i)
		insts[i] = sp.Instance
		w := sp.Instance.Worktree
		if w == nil || w.Base != base || w.BaseRef != "main" || w.Branch != "pifleet/"+sp.Instance.InstanceID ||
			sp.Instance.Cwd != w.Path || !strings.HasPrefix(w.Path, h.cfg.StateDir) {
			t.Fatalf("spawned %+v worktree %+v", sp.Instance, w)
		}
	}
	for i, in := range insts {
		c.rpc(in.InstanceID, fmt.Sprintf("t-%d", i), prompt("p", fmt.Sprintf("write: f.txt worker %d\nsay: wrote it", i)))
	}
	done := map[string]*transport.TaskDoneFrame{}
	for len(done) < n {
		td := nextOf[*transport.TaskDoneFrame](c, nil)
		c.ack(td)
		done[td.TaskID] = td
	}
	for i, in := range insts {
		td := done[fmt.Sprintf("t-%d", i)]
		want := fmt.Sprintf("pifleet/t-%d-write-f-txt-worker-%d-say-wrote-it", i, i)
		if td.Status != transport.TaskSettled || td.Worktree == nil || td.Worktree.Branch != want || td.Worktree.Base != base ||
			td.Worktree.Files != 1 || td.Worktree.Insertions != 1 || td.Worktree.Deletions != 3 {
			t.Errorf("task_done %d: %+v worktree %+v", i, td, td.Worktree)
		}
		got, err := os.ReadFile(filepath.Join(in.Worktree.Path, "f.txt"))
		if err != nil || string(got) != fmt.Sprintf("worker %d", i) {
			t.Errorf("worktree %d holds %q, %v", i, got, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "f.txt")); string(b) != "one\ntwo\nthree\n" {
		t.Errorf("the user's f.txt is %q", b)
	}
	if st := runGit(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("the user's tree changed:\n%s", st)
	}
	if got := len(worktreesOf(t, repo)); got != n+1 {
		t.Errorf("%d worktrees", got)
	}
	if got := strings.Count(runGit(t, repo, "branch", "--list", "pifleet/*"), "\n"); got != n {
		t.Errorf("%d pifleet branches", got)
	}
	// The task's diff against its base, from the agent (fs_diff base).
	d := &transport.FsDiffFrame{InstanceID: insts[3].InstanceID, Base: true}
	d.ID = "d"
	c.send(d)
	r := c.reply("d").(*transport.FsResultFrame)
	if r.Error != nil || r.Text == nil || !strings.Contains(*r.Text, "+worker 3") || !strings.Contains(*r.Text, "-one") {
		t.Errorf("diff %+v", r)
	}
}

// Non-git cwds, dirty trees, detached HEADs, a bad base and a missing
// git are clear spawn errors, and nothing is left behind.
func TestIsolationRefusals(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	repo := gitRepo(t)
	refused := func(id, cwd string, mod func(*transport.SpawnFrame)) string {
		t.Helper()
		e, ok := c.spawn(id, cwd, "default", isolatedSpawn(mod)).(*transport.SpawnErrorFrame)
		if !ok {
			t.Fatalf("%s: spawned", id)
		}
		return e.Code
	}
	if code := refused("a", t.TempDir(), nil); code != "not_a_repo" {
		t.Errorf("non-git: %s", code)
	}
	if err := os.WriteFile(filepath.Join(repo, "f.txt"), []byte("dirty\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := refused("b", repo, nil); code != "dirty_tree" {
		t.Errorf("dirty: %s", code)
	}
	runGit(t, repo, "checkout", "-q", "f.txt")
	runGit(t, repo, "checkout", "-q", "--detach")
	if code := refused("c", repo, nil); code != "detached_head" {
		t.Errorf("detached: %s", code)
	}
	if code := refused("d", repo, func(f *transport.SpawnFrame) { f.Isolation.Base = "no-such-ref" }); code != "bad_base" {
		t.Errorf("bad base: %s", code)
	}
	if code := refused("e", repo, func(f *transport.SpawnFrame) { f.Isolation.Branch, f.Isolation.Base = "main", "main" }); code != "branch_exists" {
		t.Errorf("branch taken: %s", code)
	}
	// A base ref is fine on a detached HEAD.
	in := c.mustSpawn("f", repo, "default", isolatedSpawn(func(f *transport.SpawnFrame) { f.Isolation.Base = "main" }))
	if in.Worktree == nil || in.Worktree.BaseRef != "main" {
		t.Errorf("with a base: %+v", in.Worktree)
	}
	if got := len(worktreesOf(t, repo)); got != 2 {
		t.Errorf("%d worktrees after the refusals", got)
	}
	entries, _ := os.ReadDir(filepath.Join(h.cfg.StateDir, "worktrees"))
	if len(entries) != 2 { // f's worktree and its record
		t.Errorf("worktree dir holds %d entries", len(entries))
	}

	h2 := newHarness(t, hopts{mod: func(c *Config) { c.Git = "/nonexistent/git" }})
	c2 := h2.dial(t)
	c2.hello()
	e, ok := c2.spawn("g", repo, "default", isolatedSpawn(nil)).(*transport.SpawnErrorFrame)
	if !ok || e.Code != "no_git" {
		t.Errorf("missing git: %+v", e)
	}
}

// spawnTask spawns an isolated worker, runs one task to its task_done and
// returns the instance.
func spawnTask(t *testing.T, c *client, repo, id, taskID, script string) transport.InstanceInfo {
	t.Helper()
	in := c.mustSpawn(id, repo, "default", isolatedSpawn(nil))
	c.rpc(in.InstanceID, taskID, prompt("p", script))
	td := nextOf[*transport.TaskDoneFrame](c, func(f *transport.TaskDoneFrame) bool { return f.TaskID == taskID })
	c.ack(td)
	return in
}

// Delivery on accept, each mode with real git: branch (committed on the
// worker's branch, the author configured), patch (git format-patch text),
// merge into main, a merge conflict (a typed error; nothing changes and
// the task stays open), and the worktrees of stopped workers removed,
// git's worktree list clean.
func TestDeliveryModes(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.DeliveryAuthorName, c.DeliveryAuthorEmail = "Review Bot", "bot@example.com" }})
	c := h.dial(t)
	c.hello()
	repo := gitRepo(t)

	a := spawnTask(t, c, repo, "sa", "t-a", "write: f.txt from a\nsay: done")
	acc := &transport.TaskAcceptFrame{TaskID: "t-a", Disposition: transport.DispositionStop, Deliver: transport.DeliverBranch}
	acc.ID = "acc-a"
	c.send(acc)
	d := nextOf[*transport.DeliveredFrame](c, nil)
	if d.ID != "" || d.Mode != transport.DeliverBranch || d.Branch != "pifleet/t-a-write-f-txt-from-a-say-done" || d.Commit == "" {
		t.Fatalf("delivered %+v", d)
	}
	if st, ok := c.reply("acc-a").(*transport.StoppedFrame); !ok || st.InstanceID != a.InstanceID {
		t.Fatalf("accept answer %+v", st)
	}
	if log := runGit(t, repo, "log", "-1", "--format=%an <%ae>|%s", d.Branch); log != "Review Bot <bot@example.com>|pifleet task t-a (t-a-write-f-txt-from-a-say-done)\n" {
		t.Errorf("commit %q", log)
	}
	if got := runGit(t, repo, "show", d.Branch+":f.txt"); got != "from a" {
		t.Errorf("branch f.txt %q", got)
	}
	if _, err := os.Stat(a.Worktree.Path); !os.IsNotExist(err) {
		t.Error("the stopped worker's worktree is still there")
	}

	b := spawnTask(t, c, repo, "sb", "t-b", "write: g.txt new file\nsay: done")
	dl := &transport.DeliverFrame{TaskID: "t-b", InstanceID: b.InstanceID, Mode: transport.DeliverPatch}
	dl.ID = "dl-b"
	c.send(dl)
	pd := c.reply("dl-b").(*transport.DeliveredFrame)
	if !strings.HasPrefix(pd.Patch, "From "+pd.Commit) || !strings.Contains(pd.Patch, "+++ b/g.txt") {
		t.Errorf("patch %q", pd.Patch)
	}
	// Accept with nothing more to deliver: stopped, worktree and (patch
	// delivered) branch removed.
	acc = &transport.TaskAcceptFrame{TaskID: "t-b", Disposition: transport.DispositionStop, Deliver: transport.DeliverNone}
	acc.ID = "acc-b"
	c.send(acc)
	c.reply("acc-b")
	if br := runGit(t, repo, "branch", "--list", b.Worktree.Branch, pd.Branch); br != "" {
		t.Errorf("patch branch kept: %q", br)
	}

	// Two workers change the same line; the first merges, the second
	// conflicts.
	m1 := spawnTask(t, c, repo, "m1", "t-m1", "write: f.txt m1\nsay: done")
	m2 := spawnTask(t, c, repo, "m2", "t-m2", "write: f.txt m2\nsay: done")
	acc = &transport.TaskAcceptFrame{TaskID: "t-m1", Disposition: transport.DispositionStop, Deliver: transport.DeliverMerge}
	acc.ID = "acc-m1"
	c.send(acc)
	md := nextOf[*transport.DeliveredFrame](c, func(f *transport.DeliveredFrame) bool { return f.TaskID == "t-m1" })
	c.reply("acc-m1")
	if md.Target != "main" || strings.TrimSpace(runGit(t, repo, "rev-parse", "main")) != md.Commit {
		t.Errorf("merge %+v", md)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "f.txt")); string(b) != "m1" {
		t.Errorf("the user's checked-out main was not updated by the merge: %q", b)
	}
	head := runGit(t, repo, "rev-parse", "main")
	acc = &transport.TaskAcceptFrame{TaskID: "t-m2", Disposition: transport.DispositionStop, Deliver: transport.DeliverMerge}
	acc.ID = "acc-m2"
	c.send(acc)
	e, ok := c.reply("acc-m2").(*transport.ErrorFrame)
	if !ok || e.Code != "merge_conflict" || !strings.Contains(e.Message, "f.txt") {
		t.Fatalf("conflict: %+v", e)
	}
	if runGit(t, repo, "rev-parse", "main") != head || runGit(t, repo, "status", "--porcelain") != "" {
		t.Error("a conflicting merge changed main or the user's tree")
	}
	if l := c.roundTrip("l"); !slicesHas(l.Instances, m2.InstanceID, transport.InstanceRunning) {
		t.Errorf("the conflicting task's worker is not running: %+v", l.Instances)
	}
	if _, err := os.Stat(filepath.Join(m2.Worktree.Path, "f.txt")); err != nil {
		t.Error("the conflicting task's worktree is gone")
	}
	// Discarded: accept with none, stop.
	acc = &transport.TaskAcceptFrame{TaskID: "t-m2", Disposition: transport.DispositionStop, Deliver: transport.DeliverNone}
	acc.ID = "acc-m2b"
	c.send(acc)
	c.reply("acc-m2b")
	if got := worktreesOf(t, repo); len(got) != 1 {
		t.Errorf("worktrees left: %v", got)
	}
	if p := runGit(t, repo, "worktree", "prune", "--dry-run", "--verbose"); p != "" {
		t.Errorf("prune would remove: %s", p)
	}
	if br := runGit(t, repo, "branch", "--list", "pifleet/*"); strings.Count(br, "\n") != 2 { // t-a's and t-m1's
		t.Errorf("branches %q", br)
	}
	entries, _ := os.ReadDir(filepath.Join(h.cfg.StateDir, "worktrees"))
	if len(entries) != 0 {
		t.Errorf("worktree state left: %v", entries)
	}
	_ = m1
}

func slicesHas(l []transport.InstanceInfo, id string, st transport.InstanceState) bool {
	for _, in := range l {
		if in.InstanceID == id && in.State == st {
			return true
		}
	}
	return false
}

// No worktree leaks across kill -9 of the agent: a restarted agent keeps
// the worktree of a worker it re-adopts, removes one it died making (a
// record and a worktree but no instance), and for a worker that ended
// commits what its worktree held on its branch before removing it; git's
// worktree list is then clean (nothing for git worktree prune).
func TestWorktreesSurviveKill9WithoutLeaks(t *testing.T) {
	w := newWorld(t)
	repo := gitRepo(t)
	p := w.start(t)
	c := dialAddr(t, p.addr, "")
	c.hello()
	in := c.mustSpawn("s", repo, "default", isolatedSpawn(nil))
	c.rpc(in.InstanceID, "t-k", prompt("p", "write: f.txt crash work\nsay: ok"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	c.ack(td)
	c.roundTrip("l0")
	branch := td.Worktree.Branch

	// What an agent killed halfway through a spawn leaves: the record,
	// the worktree, its branch, and no instance.
	ghost := isolated{InstanceID: "i-00000000dead"}
	ghost.Repo, ghost.Dir, ghost.Branch = repo, filepath.Join(w.stateDir, "worktrees", ghost.InstanceID), "pifleet/"+ghost.InstanceID
	ghost.Cwd, ghost.Base = ghost.Dir, strings.TrimSpace(runGit(t, repo, "rev-parse", "HEAD"))
	b, _ := json.Marshal(ghost)
	if err := os.WriteFile(filepath.Join(w.stateDir, "worktrees", ghost.InstanceID+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	runGit(t, repo, "worktree", "add", "-q", "-b", ghost.Branch, ghost.Dir, "HEAD")
	p.kill9(t)
	<-c.closed

	p = w.start(t)
	d := dialAddr(t, p.addr, "")
	d.hello()
	l := d.roundTrip("l1")
	if len(l.Instances) != 1 || l.Instances[0].State != transport.InstanceRunning || l.Instances[0].Worktree == nil ||
		l.Instances[0].Worktree.Branch != branch {
		t.Fatalf("after kill -9: %+v", l.Instances)
	}
	if got := worktreesOf(t, repo); len(got) != 2 {
		t.Errorf("worktrees after the restart: %v", got)
	}
	if br := runGit(t, repo, "branch", "--list", ghost.Branch); br != "" {
		t.Errorf("the half-made worktree's branch is left: %q", br)
	}
	st := &transport.StopFrame{InstanceID: in.InstanceID}
	st.ID = "stop"
	d.send(st)
	d.reply("stop")
	if _, err := os.Stat(in.Worktree.Path); err != nil {
		t.Errorf("a stopped, undelivered worker's worktree must stay for review: %v", err)
	}
	p.kill9(t)
	<-d.closed

	p = w.start(t)
	e := dialAddr(t, p.addr, "")
	e.hello()
	e.roundTrip("l2")
	if got := worktreesOf(t, repo); len(got) != 1 {
		t.Errorf("worktrees after the worker ended: %v", got)
	}
	if out := runGit(t, repo, "worktree", "prune", "--dry-run", "--verbose"); out != "" {
		t.Errorf("git worktree prune would remove: %s", out)
	}
	if got := runGit(t, repo, "show", branch+":f.txt"); got != "crash work" {
		t.Errorf("the ended worker's work on %s: %q", branch, got)
	}
	if log := runGit(t, repo, "log", "-1", "--format=%s", branch); !strings.Contains(log, "work left by instance "+in.InstanceID) {
		t.Errorf("salvage commit %q", log)
	}
	if entries, _ := os.ReadDir(filepath.Join(w.stateDir, "worktrees")); len(entries) != 0 {
		t.Errorf("worktree state left: %v", entries)
	}
	p.kill9(t)
	w.stopAll(t)
}

// A worker whose work was delivered leaves no worktree behind when it is
// stopped; its branch stays.
func TestStopAfterDeliveryRemovesTheWorktree(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	repo := gitRepo(t)
	in := spawnTask(t, c, repo, "s", "t-d", "write: g.txt g\nsay: done")
	dl := &transport.DeliverFrame{TaskID: "t-d", InstanceID: in.InstanceID, Mode: transport.DeliverBranch}
	dl.ID = "dl"
	c.send(dl)
	d := c.reply("dl").(*transport.DeliveredFrame)
	st := &transport.StopFrame{InstanceID: in.InstanceID}
	st.ID = "st"
	c.send(st)
	c.reply("st")
	if _, err := os.Stat(in.Worktree.Path); !os.IsNotExist(err) {
		t.Error("worktree left after a delivered worker stopped")
	}
	if got := runGit(t, repo, "show", d.Branch+":g.txt"); got != "g" {
		t.Errorf("branch %s: %q", d.Branch, got)
	}
	if got := worktreesOf(t, repo); len(got) != 1 {
		t.Errorf("worktrees %v", got)
	}
}
