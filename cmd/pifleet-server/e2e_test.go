//go:build unix

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// e2eWait bounds each wait of the end-to-end test so that a broken fleet
// fails with a message instead of hanging; it never paces the test.
const e2eWait = 60 * time.Second

// startWorkerAgent runs a real agent whose workers are the scripted
// worker, behind this test binary as their shim.
func startWorkerAgent(t *testing.T, reg string) string {
	t.Helper()
	return startAgentOfKind(t, reg, pitest.Scripted)
}

// startAgentOfKind runs a real agent whose workers are of that kind: the
// scripted worker, or the real pi (offline, on the faux provider the
// bundle ships; the test skips without it).
func startAgentOfKind(t *testing.T, reg string, kind pitest.Kind) string {
	t.Helper()
	addr, _ := startAgentIn(t, reg, kind)
	return addr
}

// startAgentIn is startAgentOfKind that also returns the agent's state
// directory (where its workers' shims are found).
func startAgentIn(t *testing.T, reg string, kind pitest.Kind) (addr, stateDir string) {
	t.Helper()
	return startAgentWith(t, reg, kind, nil)
}

// startAgentWith is startAgentIn whose configuration mod (when not nil)
// has the last word on.
func startAgentWith(t *testing.T, reg string, kind pitest.Kind, mod func(*agent.Config)) (addr, stateDir string) {
	t.Helper()
	ps := pitest.Command(t, kind, pitest.Options{})
	whois, err := identity.ParseStatic("127.0.0.1=box")
	if err != nil {
		t.Fatal(err)
	}
	stateDir = socketDir(t)
	// Before the agent's own cleanup, so it runs after it: a test that
	// fails before it stopped its workers leaves none running.
	e2ekit.CleanupWorkers(t, stateDir)
	cfg := agent.Config{
		Machine: "box", Listen: "127.0.0.1:0", Pin: trust.Pin{Machine: "box"}, Whois: whois,
		StateDir: stateDir, SessionsRoot: filepath.Join(ps.AgentDir, "sessions"), Registry: reg,
		PiCommand: []string{ps.Path}, ShimCommand: []string{os.Args[0], "shim"}, Env: ps.Env,
		StopGrace: 2 * time.Second, SessionsPoll: -1,
	}
	if kind == pitest.RealPi {
		// Offline, and nothing of the machine's own pi configuration.
		cfg.PiArgs = []string{"--offline", "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files"}
		cfg.StopGrace = 10 * time.Second
	}
	if mod != nil {
		mod(&cfg)
	}
	return runAgent(t, cfg), stateDir
}

// until reads the watch stream until ok accepts a change.
func until(t *testing.T, s *controlapi.Stream, what string, ok func(controlapi.Change) bool) controlapi.Change {
	t.Helper()
	for {
		ch, err := s.Next()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok(ch) {
			return ch
		}
	}
}

// TestEndToEnd drives a real fleet, a real agent and a scripted worker
// with the client commands only: spawn with progress, a prompt waited
// for, a task rejected once and accepted with stop.
func TestEndToEnd(t *testing.T) {
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	publishDefault(t, reg, map[string]string{
		"bundle.json":            `{"skills":["skills/review"],"model":{"primary":{"provider":"faux","id":"faux-1"}}}`,
		"skills/review/SKILL.md": "---\nname: review\ndescription: review code\n---\nReview.\n",
	})
	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + startWorkerAgent(t, reg)}, WhoisStatic: []string{"127.0.0.1=box"}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*e2eWait)
	defer cancel()
	s, c := startServe(t, cmd)
	api := "--api=" + s.API.String()
	run := cliOK(t, api)

	run("trust", "set", "box", "steer")
	awaitAgentState(t, c, "box", "established")

	// Spawn: the id on stdout, the provisioning on stderr.
	status, out, errOut := runCLI(t, "spawn", api, "--agent=box", "--cwd="+dir, "--bundle=default", "--progress=always")
	if status != 0 {
		t.Fatalf("spawn: %d %s", status, errOut)
	}
	id := strings.TrimSpace(out)
	if !strings.HasPrefix(errOut, "accepted") || !strings.Contains(errOut, "files fetched") {
		t.Errorf("spawn progress:\n%s", errOut)
	}

	if got := run("prompt", "--wait", id, "say: pong"); got != "pong\n" {
		t.Errorf("prompt --wait printed %q, want the final message", got)
	}

	// The reviewer's view of the worker's tree, through the agent.
	run("prompt", "--wait", id, "write: notes/draft.txt first line\nsay: wrote it")
	if got := run("cat", id, "notes/draft.txt"); got != "first line\n" {
		t.Errorf("cat printed %q", got)
	}
	if got := run("ls", id, "notes"); !strings.Contains(got, "  draft.txt\n") {
		t.Errorf("ls printed %q", got)
	}
	if got := run("grep", id, "first", "--glob=**/*.txt"); !strings.Contains(got, "draft.txt") || !strings.Contains(got, "first line") {
		t.Errorf("grep printed %q", got)
	}
	if status, _, errOut := runCLI(t, "diff", id, api); status != 1 || !strings.Contains(errOut, "file_error (not_a_repo)") {
		t.Errorf("diff outside a repository: %d %s", status, errOut)
	}

	if got := run("output", id); !strings.Contains(got, "user: say: pong\n") || !strings.Contains(got, "says: pong\n") {
		t.Errorf("output is no transcript:\n%s", got)
	}
	// logs -f follows the worker until it stops.
	followed := make(chan string, 1)
	go func() {
		_, out, _ := runCLI(t, "logs", "-f", id, api)
		followed <- out
	}()

	w, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	out = run("prompt", "--task", id, "say: first try")
	task, ok := strings.CutPrefix(strings.TrimSpace(out), "task ")
	if !ok {
		t.Fatalf("prompt --task printed %q", out)
	}
	isReview := func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeInstanceState && ch.InstanceID == id && ch.To == "awaiting_review"
	}
	until(t, w, "the task's first end", isReview)
	if out := run("reject", task, "say: second try"); !strings.Contains(out, "revising") {
		t.Errorf("reject: %q", out)
	}
	until(t, w, "the revision's end", isReview)
	var tasks []controlapi.Task
	if err := json.Unmarshal([]byte(run("tasks", "--json")), &tasks); err != nil || len(tasks) != 1 {
		t.Fatalf("tasks --json: %v %+v", err, tasks)
	}
	if tk := tasks[0]; tk.ID != task || tk.Rejects != 1 || tk.LastDone == nil || tk.LastDone.LastAssistantMessage != "second try" {
		t.Errorf("task after the revision: %+v (last %+v)", tk, tk.LastDone)
	}
	run("accept", "--disposition=stop", task)
	select {
	case got := <-followed:
		for _, want := range []string{"says: pong\n", "says: first try\n", "say: second try\n", "says: second try\n", "worker: stopped\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("logs -f lacks %q:\n%s", want, got)
			}
		}
	case <-time.After(30 * time.Second):
		t.Error("logs -f did not end when the worker stopped")
	}
	var st controlapi.Status
	if err := json.Unmarshal([]byte(run("status", "--json")), &st); err != nil || len(st.Instances) != 1 {
		t.Fatalf("status --json: %v %+v", err, st)
	}
	if in := st.Instances[0]; in.ID != id || in.State != "stopped" {
		t.Errorf("instance after accept --disposition=stop: %+v", in)
	}
	if status, _, errOut := runCLI(t, "prompt", api, id, "say: too late"); status == 0 || !strings.Contains(errOut, "invalid_state") {
		t.Errorf("prompt to a stopped worker: %d %s", status, errOut)
	}

	// A second worker: a task waited for, then a dialog answered from the
	// command line.
	id2 := strings.TrimSpace(run("spawn", "--agent=box", "--cwd="+dir, "--bundle=default"))
	out = run("prompt", "--task", "--wait", id2, "say: done at once")
	if !strings.HasPrefix(out, "task ") || !strings.HasSuffix(out, "\ndone at once\n") {
		t.Errorf("prompt --task --wait printed %q", out)
	}
	task2 := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "task ")
	run("accept", task2) // keep_idle
	run("prompt", id2, "/faux-ui")
	ui := until(t, w, "the worker's dialog", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeUIRequest && ch.InstanceID == id2
	})
	var req controlapi.UIRequest
	if err := json.Unmarshal(ui.Data, &req); err != nil || req.Kind != "confirm" || req.Title != "faux-ui" {
		t.Fatalf("ui_request change: %v %s", err, ui.Data)
	}
	if err := json.Unmarshal([]byte(run("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	for _, in := range st.Instances {
		if in.ID == id2 && (len(in.PendingUI) != 1 || in.PendingUI[0].ID != req.ID) {
			t.Errorf("status does not list the pending dialog: %+v", in)
		}
	}
	if out := run("ui", "answer", req.ID, "true"); out != "answered "+req.ID+": true\n" {
		t.Errorf("ui answer printed %q", out)
	}
	// Answered once: the dialog is gone.
	if status, _, errOut := runCLI(t, "ui", "answer", req.ID, "false", api); status == 0 || !strings.Contains(errOut, "unknown_ui_request") {
		t.Errorf("second answer: %d %s", status, errOut)
	}

	// The model pin from the command line: switching is refused while it
	// holds, and allowed again once it is lifted.
	var mp controlapi.ModelPin
	if err := json.Unmarshal([]byte(run("model", "pin", id2, "--json")), &mp); err != nil || !mp.Pinned || mp.Model == nil || mp.Model.ID != "faux-1" {
		t.Fatalf("model pin --json: %v %+v", err, mp)
	}
	if status, _, errOut := runCLI(t, "model", id2, "faux/faux-1", api); status == 0 || !strings.Contains(errOut, "model_pinned") {
		t.Errorf("model while pinned: %d %s", status, errOut)
	}
	if out := run("status"); !strings.Contains(out, "faux/faux-1 (pinned)") {
		t.Errorf("status does not show the pin:\n%s", out)
	}
	if out := run("model", "unpin", id2); out != id2+" model unpinned (faux/faux-1)\n" {
		t.Errorf("model unpin printed %q", out)
	}
	run("model", id2, "faux/faux-1")
	run("stop", id2)
}
