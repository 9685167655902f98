//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/fleet/controlapi"
)

// git runs git in dir with a fixed identity and none of the machine's
// configuration, and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
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

// commit writes README in the repository dir and commits it; it returns
// the new HEAD.
func commit(t *testing.T, dir, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-q", "-m", content)
	return git(t, dir, "rev-parse", "HEAD")
}

// TestSessionsEndToEnd drives the session registry with the client
// commands only, against a real server, a real agent and scripted
// workers: a baseline created and listed, a task spawned from it by name,
// attach to the pinned baseline refused, the priming reply found by a
// search, and the baseline flagged stale once its repository moves on.
func TestSessionsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	publishDefault(t, reg, map[string]string{"bundle.json": `{"model":{"primary":{"provider":"faux","id":"faux-1"}}}`})
	repo := filepath.Join(dir, "api")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q", "-b", "main")
	head := commit(t, repo, "first\n")

	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + startWorkerAgent(t, reg), "gone=" + closedPort(t)}, WhoisStatic: []string{"127.0.0.1=box"}}
	s, c := startServe(t, cmd)
	api := "--api=" + s.API.String()
	run := cliOK(t, api)
	runJSON := func(v any, args ...string) {
		t.Helper()
		out := run(append(args, "--json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("%v --json: %v\n%s", args, err, out)
		}
	}

	run("trust", "set", "box", "steer")
	awaitAgentState(t, c, "box", "established")

	// The baseline: primed, compacted, named after the directory.
	out := run("baseline", "create", "--agent=box", "--cwd="+repo, "--bundle=default", "--prompt=say: the zanzibar module owns billing")
	for _, want := range []string{"baseline:api\n", "gitHead    " + head + "\n", "compacted  yes\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("baseline create lacks %q:\n%s", want, out)
		}
	}

	var baselines []controlapi.Session
	runJSON(&baselines, "sessions", "--kind", "baseline")
	if len(baselines) != 1 {
		t.Fatalf("sessions --kind baseline: %+v", baselines)
	}
	base := baselines[0]
	if base.Name != "baseline:api" || base.Machine != "box" || base.Kind != controlapi.KindBaseline || !base.Pinned ||
		base.GitHead != head || base.Cwd != repo || base.Bundle != "default" || base.StaleBaseline || base.AttachedInstanceID != "" {
		t.Fatalf("baseline listed as %+v", base)
	}
	if !strings.Contains(out, "path       "+base.Path+"\n") {
		t.Errorf("baseline create printed another path than the registry's %s:\n%s", base.Path, out)
	}

	// A task from the baseline by name: machine, cwd and bundle come from
	// its record.
	id := strings.TrimSpace(run("spawn", "--from-session=baseline:api"))
	var st controlapi.Status
	runJSON(&st, "status")
	var inst *controlapi.Instance
	for i := range st.Instances {
		if st.Instances[i].ID == id {
			inst = &st.Instances[i]
		}
	}
	if inst == nil || inst.Agent != "box" || inst.Cwd != repo || inst.Bundle != "default" || inst.FromSession != base.Path ||
		inst.SessionMode != controlapi.SessionClone || inst.StaleBaseline {
		t.Fatalf("instance spawned from the baseline: %+v", inst)
	}
	if len(st.Baselines) != 1 || st.Baselines[0].Path != base.Path {
		t.Errorf("status baselines: %+v", st.Baselines)
	}
	if out := run("status"); !strings.Contains(out, "baseline:api (clone)") || !strings.Contains(out, "baseline:api  box") {
		t.Errorf("status does not show the instance's origin and the baseline:\n%s", out)
	}

	// Attaching to the pinned baseline is refused, and says why.
	status, out, errOut := runCLI(t, "resume", "baseline:api", "--attach", api)
	if status == 0 || out != "" || !strings.Contains(errOut, "session_pinned") || !strings.Contains(errOut, "resume it as a clone") {
		t.Errorf("resume --attach of the baseline: status %d, stdout %q, stderr %s", status, out, errOut)
	}

	// The priming reply is in the baseline's file: every agent is
	// searched (the unreachable one is named), or the one named.
	for _, tc := range []struct {
		args   []string
		failed string
	}{
		{[]string{"sessions", "search", "zanzibar"}, "gone"},
		{[]string{"sessions", "search", "zanzibar", "--machine=box", "--cwd=" + repo}, ""},
	} {
		var res controlapi.SearchResult
		runJSON(&res, tc.args...)
		found := false
		for _, h := range res.Hits {
			found = found || (h.Machine == "box" && h.Path == base.Path && h.SessionID == base.SessionID)
		}
		var failed []string
		for _, f := range res.Failed {
			if !errors.Is(f.Error, controlapi.ErrNotConnected) {
				t.Errorf("%v: %s failed with %v; want not_connected", tc.args, f.Machine, f.Error)
			}
			failed = append(failed, f.Machine)
		}
		if !found || strings.Join(failed, ",") != tc.failed {
			t.Errorf("%v: %+v; want a hit in the baseline %s, and failed %q", tc.args, res, base.Path, tc.failed)
		}
	}
	status, out, errOut = runCLI(t, "sessions", "search", "zanzibar", api)
	if status != 0 || !strings.Contains(out, "box      "+base.SessionID) || !strings.Contains(errOut, "warning: gone not searched: not_connected") {
		t.Errorf("sessions search: %d\n%s%s", status, out, errOut)
	}
	if status, _, errOut := runCLI(t, "sessions", "--machine=nobody", api); status == 0 || !strings.Contains(errOut, "unknown_agent") {
		t.Errorf("sessions of an unknown agent: %d %s", status, errOut)
	}

	// The repository moves on: the listing flags the baseline, and a
	// resume from it warns.
	commit(t, repo, "second\n")
	if out := run("sessions", "--kind=baseline"); !strings.Contains(out, "STALE") {
		t.Errorf("sessions after a commit does not flag the baseline:\n%s", out)
	}
	status, out, errOut = runCLI(t, "resume", "baseline:api", api)
	if status != 0 || !strings.Contains(errOut, "stale baseline") {
		t.Fatalf("resume of a stale baseline: status %d, stderr %s", status, errOut)
	}
	run("stop", strings.TrimSpace(out))
	run("stop", id)
}
