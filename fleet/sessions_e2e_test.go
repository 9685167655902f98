//go:build unix

package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
)

// git runs git in dir with a fixed identity and returns its trimmed output.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitRepo makes dir a repository with one commit and returns its HEAD.
func gitRepo(t testing.TB, dir string) string {
	t.Helper()
	git(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("repo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-q", "-m", "first")
	return git(t, dir, "rev-parse", "HEAD")
}

func fileSum(t testing.TB, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// entryLines returns the lines of a session file after its header (skip
// 1), or of a mirror (skip 0).
func entryLines(t testing.TB, path string, skip int) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for n := 0; sc.Scan(); n++ {
		if n >= skip && len(sc.Bytes()) > 0 {
			out = append(out, sc.Text())
		}
	}
	return out
}

func findSession(t testing.TB, f *fleet.Fleet, path string) fleet.SessionView {
	t.Helper()
	for _, v := range f.ListSessions(fleet.SessionFilter{}) {
		if v.Path == path {
			return v
		}
	}
	t.Fatalf("session %s is not in the registry: %+v", path, f.ListSessions(fleet.SessionFilter{}))
	return fleet.SessionView{}
}

// Seed §8 end to end with the agent daemon and the scripted worker:
// baseline creation (prime, settle, compact, name, pinned, gitHead, stop),
// a task spawned from it (clone at once, new file whose parentSession is
// the baseline, named task:<taskId>:<slug>; baseline bytes unchanged:
// AC-3.5.1, AC-3.5.2), the stale flag once HEAD moves (AC-3.5.6), resume
// refusals (AC-3.5.3), and the entry mirror equal to the worker's file.
func TestBaselineCloneResumeAndMirror(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, cwd := startAgent(t, reg)
	head := gitRepo(t, cwd)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	ctx := t.Context()

	b, err := tf.CreateBaseline(ctx, fleet.BaselineOptions{Spawn: fleet.SpawnOptions{Agent: "worker-01", Cwd: cwd, Bundle: "plain"}, Prompt: "say: primed on the repo", Repo: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "baseline:api" || b.GitHead != head || b.Summary != "primed on the repo" || b.Path == "" {
		t.Fatalf("baseline %+v (HEAD %s)", b, head)
	}
	base := findSession(t, tf.Fleet, b.Path)
	if base.Kind != session.KindBaseline || !base.Info().Pinned || base.GitHead != head || base.Bundle != "plain" ||
		base.StaleBaseline || base.AttachedInstanceID != "" {
		t.Fatalf("baseline record %+v", base)
	}
	for _, i := range tf.Status(ctx).Instances {
		if i.State != fleet.StateStopped {
			t.Fatalf("the baseline worker is %s, want stopped", i.State)
		}
	}
	baseSum := fileSum(t, b.Path)

	// A task from the baseline, by name; machine, cwd and bundle come
	// from its record.
	inst, err := tf.Spawn(ctx, fleet.SpawnOptions{FromSession: "baseline:api"})
	if err != nil {
		t.Fatal(err)
	}
	if o := inst.Origin(); o == nil || o.Source != b.Path || o.Mode != transport.SessionClone || o.StaleBaseline {
		t.Fatalf("origin %+v", o)
	}
	clonePath := inst.SessionPath()
	if clonePath == "" || clonePath == b.Path {
		t.Fatalf("the worker writes %q (baseline %s)", clonePath, b.Path)
	}
	task, err := inst.Submit(ctx, "say: fixed the flaky tests", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := tf.report(t); r.TaskID != task.ID() {
		t.Fatalf("report %+v", r)
	}
	wantName := "task:" + task.ID() + ":say-fixed-the-flaky-tests"
	tf.waitUntil(t, "the clone named "+wantName, func(fleet.Status) bool {
		for _, v := range tf.ListSessions(fleet.SessionFilter{Kind: session.KindTask}) {
			if v.Path == clonePath && v.Name == wantName {
				return true
			}
		}
		return false
	})
	clone := findSession(t, tf.Fleet, clonePath)
	if clone.ParentSession != b.Path || clone.AttachedInstanceID != inst.ID() || len(clone.TaskIDs) != 1 || clone.TaskIDs[0] != task.ID() {
		t.Fatalf("clone record %+v", clone)
	}
	if got, err := tf.ResolveSession("", "baseline:api"); err != nil || got.Path != b.Path {
		t.Fatalf("baseline:api resolves to %+v, %v; want the baseline, never its clone", got, err)
	}

	// The mirror holds exactly the clone's entries.
	if err := tf.CatchUp(ctx, inst.ID()); err != nil {
		t.Fatal(err)
	}
	mirror := tf.MirrorPath("worker-01", clonePath)
	if got, want := entryLines(t, mirror, 0), entryLines(t, clonePath, 1); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mirror (%d lines) differs from the session file (%d lines):\n%s\n----\n%s", len(got), len(want),
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := task.Accept(ctx, transport.DispositionStop); err != nil {
		t.Fatal(err)
	}

	// Resume: attach to the pinned baseline is refused before any frame;
	// the task's session can be attached once its worker has ended.
	if _, err := tf.Resume(ctx, "baseline:api", fleet.ResumeOptions{Mode: transport.SessionAttach}); !errors.Is(err, fleet.ErrSessionPinned) {
		t.Fatalf("attach to the baseline: %v, want ErrSessionPinned", err)
	}
	again, err := tf.Resume(ctx, wantName, fleet.ResumeOptions{Mode: transport.SessionAttach})
	if err != nil {
		t.Fatal(err)
	}
	if again.SessionPath() != clonePath {
		t.Fatalf("attached worker writes %s, want %s", again.SessionPath(), clonePath)
	}
	if _, err := tf.Resume(ctx, wantName, fleet.ResumeOptions{Mode: transport.SessionAttach}); !errors.Is(err, fleet.ErrSessionBusy) {
		t.Fatalf("second attach: %v, want ErrSessionBusy", err)
	}
	if text, err := again.Prompt(ctx, "say: resumed", fleet.PromptOptions{}); err != nil || text != "resumed" {
		t.Fatalf("prompt on the attached session: %q, %v", text, err)
	}
	if err := again.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// HEAD moves: the next spawn from the baseline is flagged stale, and
	// so is the baseline in the listing.
	if err := os.WriteFile(filepath.Join(cwd, "README"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, cwd, "commit", "-q", "-am", "second")
	stale, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: "worker-01", FromSession: b.Path})
	if err != nil {
		t.Fatal(err)
	}
	if o := stale.Origin(); o == nil || !o.StaleBaseline {
		t.Fatalf("origin after HEAD moved: %+v", o)
	}
	if v := findSession(t, tf.Fleet, b.Path); !v.StaleBaseline {
		t.Fatalf("baseline not flagged stale: %+v", v)
	}
	if err := stale.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if fileSum(t, b.Path) != baseSum {
		t.Fatal("the baseline file changed")
	}
	if _, err := tf.Spawn(ctx, fleet.SpawnOptions{FromSession: "baseline:nope"}); !errors.Is(err, fleet.ErrUnknownSession) ||
		!strings.Contains(err.Error(), "unknown baseline: nope") {
		t.Fatalf("unknown baseline: %v", err)
	}
}

// taskLogWatch is a zerolog JSON sink that signals the first line whose
// message and taskId match (how a test waits for the agent to reach a
// point without sleeping).
type taskLogWatch struct {
	mu      sync.Mutex
	message string
	taskID  string
	hit     chan struct{}
}

func newTaskLogWatch() *taskLogWatch { return &taskLogWatch{} }

// expect arms the watch and returns the channel closed on the match.
func (w *taskLogWatch) expect(message, taskID string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.message, w.taskID, w.hit = message, taskID, make(chan struct{})
	return w.hit
}

func (w *taskLogWatch) Write(p []byte) (int, error) {
	var l struct {
		Message string `json:"message"`
		TaskID  string `json:"taskId"`
	}
	if json.Unmarshal(p, &l) == nil {
		w.mu.Lock()
		if w.hit != nil && l.Message == w.message && l.TaskID == w.taskID {
			close(w.hit)
			w.hit = nil
		}
		w.mu.Unlock()
	}
	return len(p), nil
}

// AC-3.5.7: the server goes away while a task runs; the worker finishes
// and writes its entries while no server is up; the restarted server, on
// the same state directory, catches up by itself and its mirror of the
// session then equals the worker's file: the entries from before the
// outage untouched, exactly the outage's entries after them, none twice.
func TestCatchUpAfterServerRestartMidTask(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	logs := newTaskLogWatch()
	addr, ps := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) {
		c.Logger = zerolog.New(logs)
	})
	cwd := ps.Dir
	release := gate(t, cwd, "gate")
	stateDir := t.TempDir()
	agents := []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}}
	ctx := t.Context()

	f1 := startFleet(t, stateDir, reg, agents)
	f1.waitAgent(t, "worker-01", transport.StateEstablished)
	inst, err := f1.Spawn(ctx, fleet.SpawnOptions{Agent: "worker-01", Cwd: cwd, Bundle: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Prompt(ctx, "say: before the outage", fleet.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f1.CatchUp(ctx, inst.ID()); err != nil {
		t.Fatal(err)
	}
	path := inst.SessionPath()
	mirror := f1.MirrorPath("worker-01", path)
	before := entryLines(t, mirror, 0)
	if len(before) == 0 || strings.Join(before, "\n") != strings.Join(entryLines(t, path, 1), "\n") {
		t.Fatalf("mirror before the outage (%d lines) is not the session file", len(before))
	}
	task, err := inst.Submit(ctx, "bash: cat gate", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f1.waitChange(t, "the worker blocked in its tool", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeEvent && c.InstanceID == inst.ID() && c.Event == "tool_execution_start"
	})
	if err := f1.Close(); err != nil {
		t.Fatal(err)
	}

	done := logs.expect("task done", task.ID())
	release()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never finished its task")
	}
	outage := entryLines(t, path, 1)[len(before):]
	if len(outage) < 3 { // tool call, tool result, answer at least
		t.Fatalf("only %d entries written during the outage", len(outage))
	}

	f2 := startFleet(t, stateDir, reg, agents)
	if r := f2.report(t); r.TaskID != task.ID() {
		t.Fatalf("report after the restart: %+v", r)
	}
	f2.waitUntil(t, "the mirror caught up", func(fleet.Status) bool {
		return len(entryLines(t, mirror, 0)) >= len(before)+len(outage)
	})
	got := entryLines(t, mirror, 0)
	if strings.Join(got[:len(before)], "\n") != strings.Join(before, "\n") {
		t.Fatal("the catch-up rewrote entries mirrored before the outage")
	}
	if strings.Join(got[len(before):], "\n") != strings.Join(outage, "\n") {
		t.Fatalf("caught up %d entries, want exactly the %d written during the outage:\n%s\n----\n%s",
			len(got)-len(before), len(outage), strings.Join(got[len(before):], "\n"), strings.Join(outage, "\n"))
	}
	if err := task.Accept(ctx, transport.DispositionStop); err == nil {
		t.Fatal("a task handle of the closed fleet accepted")
	}
	t2, err := f2.Task(task.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := t2.Accept(ctx, transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
}

// Seed §8 with the real pi and its real session files: a baseline is
// primed, compacted, named and stopped; a task spawned from it runs in a
// clone whose header names the baseline as parentSession, named
// task:<taskId>:<slug>; the baseline file's bytes never change; the
// server's mirror of the clone equals pi's file.
func TestRealPiBaselineAndClone(t *testing.T) {
	pitest.Find(t)
	reg := t.TempDir()
	publishFaux(t, reg)
	addr, ps := startAgentOf(t, pitest.RealPi, reg)
	cwd := ps.Dir
	head := gitRepo(t, cwd)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	ctx := t.Context()

	b, err := tf.CreateBaseline(ctx, fleet.BaselineOptions{Spawn: fleet.SpawnOptions{Agent: "worker-01", Cwd: cwd, Bundle: "faux"}, Prompt: "say: primed", Repo: "api"})
	if err != nil {
		t.Fatal(err)
	}
	if b.GitHead != head || b.Summary != "primed" {
		t.Fatalf("baseline %+v", b)
	}
	sum, err := session.Summarize(b.Path)
	if err != nil || sum.Name != "baseline:api" {
		t.Fatalf("pi's baseline file: name %q, %v", sum.Name, err)
	}
	if v := findSession(t, tf.Fleet, b.Path); v.Kind != session.KindBaseline || !v.Info().Pinned || v.GitHead != head {
		t.Fatalf("baseline record %+v", v)
	}
	baseSum := fileSum(t, b.Path)

	inst, err := tf.Spawn(ctx, fleet.SpawnOptions{FromSession: "baseline:api"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = inst.Stop(context.Background())
		}
	})
	task, err := inst.Submit(ctx, "say: tests fixed", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := tf.report(t); r.TaskID != task.ID() || !strings.Contains(r.Summary, "tests fixed") {
		t.Fatalf("report %+v", r)
	}
	clonePath := inst.SessionPath()
	clone, err := session.Summarize(clonePath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "task:" + task.ID() + ":say-tests-fixed"; clonePath == b.Path || clone.Header.ParentSession != b.Path || clone.Name != want {
		t.Fatalf("clone %s: parentSession %q, name %q; want parent %s, name %s", clonePath, clone.Header.ParentSession, clone.Name, b.Path, want)
	}
	if err := tf.CatchUp(ctx, inst.ID()); err != nil {
		t.Fatal(err)
	}
	if got, want := entryLines(t, tf.MirrorPath("worker-01", clonePath), 0), entryLines(t, clonePath, 1); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("mirror (%d lines) differs from pi's file (%d lines)", len(got), len(want))
	}
	if err := task.Accept(ctx, transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if fileSum(t, b.Path) != baseSum {
		t.Fatal("the baseline file changed")
	}
}

// writeSessionFiles writes n one-line session files under dir, oldest
// first (mtimes a day apart from base), and returns their paths.
func writeSessionFiles(t *testing.T, dir, prefix string, n int, base time.Time) []string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range n {
		id := fmt.Sprintf("01a228e5-%s-7000-8000-%012d", prefix, i)
		p := filepath.Join(dir, id+".jsonl")
		line := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`+"\n", id)
		if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// AC-3.5.4 end to end: after a server restart the registry equals the
// agent's disk exactly — sessions removed while the server was down are
// gone, sessions created meanwhile are there — over an inventory of
// several report pages, and the server's own fields of a session on the
// last page (a baseline's gitHead and pin) survive the reconciliation.
func TestRegistryEqualsTheAgentsDiskAfterARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, ps := startAgentWith(t, pitest.Scripted, reg, nil)
	root := filepath.Join(ps.AgentDir, "sessions")
	old := writeSessionFiles(t, filepath.Join(root, "--w--"), "0000", 450, time.Unix(1_600_000_000, 0))
	head := gitRepo(t, ps.Dir)
	stateDir := t.TempDir()
	agents := []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}}
	ctx := t.Context()

	f1 := startFleet(t, stateDir, reg, agents)
	f1.waitAgent(t, "worker-01", transport.StateEstablished)
	b, err := f1.CreateBaseline(ctx, fleet.BaselineOptions{Spawn: fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain"}, Prompt: "say: primed"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f1.Close(); err != nil {
		t.Fatal(err)
	}
	// While no server is up: the baseline becomes the oldest session (the
	// last page), ten sessions go, five appear.
	ancient := time.Unix(1_500_000_000, 0)
	if err := os.Chtimes(b.Path, ancient, ancient); err != nil {
		t.Fatal(err)
	}
	for _, p := range old[100:110] {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	writeSessionFiles(t, filepath.Join(root, "--w--"), "0001", 5, time.Unix(1_700_000_000, 0))

	listing, err := session.NewLister(root).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, s := range listing.Sessions {
		want[s.Path] = true
	}
	if len(want) != 450-10+5+1 {
		t.Fatalf("the agent's disk holds %d sessions", len(want))
	}
	f2 := startFleet(t, stateDir, reg, agents)
	f2.waitUntil(t, fmt.Sprintf("the registry reconciled (%d sessions)", len(want)), func(fleet.Status) bool {
		got := f2.ListSessions(fleet.SessionFilter{Machine: "worker-01"})
		return len(got) > 0 && len(got) == len(want) && got[0].Registry == session.StateSynced
	})
	for _, v := range f2.ListSessions(fleet.SessionFilter{Machine: "worker-01"}) {
		if !want[v.Path] {
			t.Errorf("ghost %s", v.Path)
		}
	}
	base := findSession(t, f2.Fleet, b.Path)
	if base.GitHead != head || !base.PinnedByServer || base.Bundle != "plain" || base.Kind != session.KindBaseline {
		t.Fatalf("the baseline's server fields did not survive: %+v", base)
	}
}
