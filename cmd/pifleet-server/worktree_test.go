//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet/controlapi"
)

func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// The reviewer's commands for an isolated task: spawn --isolate, the
// task's branch and diff stat in tasks --json, diff TASK, deliver TASK
// patch, accept --deliver merge.
func TestIsolatedTaskCommands(t *testing.T) {
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	if _, err := registry.Publish(reg, "default", source(t, map[string]string{"bundle.json": `{}`}), registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	gitCmd(t, repo, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(repo, "f.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, repo, "add", "f.txt")
	gitCmd(t, repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "-m", "first")
	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + startWorkerAgent(t, reg)}, WhoisStatic: []string{"127.0.0.1=box"}}
	s, c := startServe(t, cmd)
	api := "--api=" + s.API.String()
	run := cliOK(t, api)
	run("trust", "set", "box", "steer")
	awaitAgentState(t, c, "box", "established")
	if status, _, errOut := runCLI(t, "spawn", api, "--agent=box", "--cwd="+repo, "--bundle=default", "--branch=x"); status == 0 || !strings.Contains(errOut, "--isolate") {
		t.Errorf("--branch without --isolate: %d %s", status, errOut)
	}
	id := strings.TrimSpace(run("spawn", "--agent=box", "--cwd="+repo, "--bundle=default", "--isolate", "--progress=never"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*e2eWait)
	defer cancel()
	w, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	task, _ := strings.CutPrefix(strings.TrimSpace(run("prompt", "--task", id, "write: f.txt changed\nsay: done")), "task ")
	until(t, w, "the task's end", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeInstanceState && ch.InstanceID == id && ch.To == "awaiting_review"
	})
	out := run("tasks", "--json")
	if !strings.Contains(out, `"branch": "pifleet/`+task+`-write-f-txt-changed-say-done"`) || !strings.Contains(out, `"insertions": 1`) {
		t.Errorf("tasks --json:\n%s", out)
	}
	if d := run("diff", task); !strings.Contains(d, "+changed") || !strings.Contains(d, "-one") {
		t.Errorf("diff TASK:\n%s", d)
	}
	if p := run("deliver", task, "patch"); !strings.HasPrefix(p, "From ") || !strings.Contains(p, "+changed") {
		t.Errorf("deliver patch:\n%s", p)
	}
	run("accept", "--deliver=merge", "--disposition=stop", task)
	if got := gitCmd(t, repo, "show", "main:f.txt"); got != "changed" {
		t.Errorf("main's f.txt after the merge: %q", got)
	}
	if l := gitCmd(t, repo, "worktree", "list"); strings.Count(l, "\n") != 1 {
		t.Errorf("worktrees left:\n%s", l)
	}
}
