//go:build unix

package agent

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
)

// publishFauxBundle publishes bundle "faux": the offline scripted provider
// extension of testdata/pi, and the model policy faux/faux-1. The worker
// gets both only through provisioning.
func publishFauxBundle(t *testing.T, root string) {
	t.Helper()
	src := t.TempDir()
	ext, err := os.ReadFile(pitest.FauxProvider(t))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(src, "ext"), 0o755)
	os.WriteFile(filepath.Join(src, "ext", "faux-provider.ts"), ext, 0o644)
	os.WriteFile(filepath.Join(src, "bundle.json"),
		[]byte(`{"extensions":["ext/faux-provider.ts"],"model":{"primary":{"provider":"faux","id":"faux-1"}}}`), 0o644)
	if _, err := registry.Publish(root, "faux", src, registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

// realPiHarness is an agent whose workers are the real pi, offline, with
// the faux bundle served over HTTP (srv.URL goes in spawn.env).
func realPiHarness(t *testing.T) (*harness, *httptest.Server) {
	t.Helper()
	return realPiHarnessWith(t, hopts{})
}

// realPiHarnessWith is realPiHarness with o's noRun, and o.mod applied
// after the real pi's configuration.
func realPiHarnessWith(t *testing.T, o hopts) (*harness, *httptest.Server) {
	t.Helper()
	piPath := pitest.Find(t)
	root := t.TempDir()
	publishFauxBundle(t, root)
	srv := httptest.NewServer(registry.NewServer(root))
	t.Cleanup(srv.Close)
	ps := pitest.Command(t, pitest.RealPi, pitest.Options{})
	h := newHarness(t, hopts{agentDir: ps.AgentDir, cwd: ps.Dir, registry: root, noRun: o.noRun, mod: func(c *Config) {
		c.PiCommand = []string{piPath}
		c.PiArgs = []string{"--offline", "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files"}
		c.Env = ps.Env
		c.Registry = ""
		c.StopGrace = 10 * time.Second
		if o.mod != nil {
			o.mod(c)
		}
	}})
	return h, srv
}

// Issue #5, with the real pi: spawn (the bundle comes from an HTTP
// registry) → get_state shows the bundle's model → a tracked prompt that
// makes a tool call → its events in order → agent_settled → task_done →
// reject → the revision runs in the same session (history intact) →
// accept with stop → stopped, the session file intact and resumable.
func TestRealPiReviewCycle(t *testing.T) {
	h, srv := realPiHarness(t)
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "faux", func(f *transport.SpawnFrame) {
		f.Env = map[string]string{"PI_FLEET_SERVER": srv.URL}
	})
	id := inst.InstanceID

	c.rpc(id, "", map[string]any{"type": "get_state", "id": "gs"})
	_, st := c.nextEvent(id, func(e event) bool { return e.ID == "gs" })
	if !strings.Contains(string(st.Data), `"id":"faux-1"`) || !strings.Contains(string(st.Data), `"provider":"faux"`) {
		t.Fatalf("get_state model: %s", st.Data)
	}

	c.rpc(id, "t-real", prompt("p", "bash: echo tool-ran"))
	var order []string
	for {
		_, e := c.nextEvent(id, func(e event) bool {
			switch e.Type {
			case "agent_start", "tool_execution_start", "tool_execution_end", "agent_end", "agent_settled":
				return true
			}
			return false
		})
		order = append(order, e.Type)
		if e.Type == "agent_settled" {
			break
		}
	}
	if got := strings.Join(order, ","); got != "agent_start,tool_execution_start,tool_execution_end,agent_end,agent_settled" {
		t.Fatalf("events in order: %s", got)
	}
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.TaskID != "t-real" || td.Status != transport.TaskSettled || !strings.Contains(td.Summary, "tool-ran") {
		t.Fatalf("task_done %+v", td)
	}
	c.ack(td)

	c.send(&transport.TaskRejectFrame{TaskID: "t-real", Feedback: "say: revised answer"})
	td2 := nextOf[*transport.TaskDoneFrame](c, func(f *transport.TaskDoneFrame) bool { return f.Seq != td.Seq })
	if td2.TaskID != "t-real" || td2.LastAssistantMessage != "revised answer" {
		t.Fatalf("revision task_done %+v", td2)
	}
	c.ack(td2)

	acc := &transport.TaskAcceptFrame{TaskID: "t-real", Disposition: transport.DispositionStop, Deliver: transport.DeliverNone}
	acc.ID = "acc"
	c.send(acc)
	stopped := c.reply("acc").(*transport.StoppedFrame)
	if stopped.Forced || stopped.SessionPath != inst.SessionPath {
		t.Fatalf("stopped %+v (spawned with %s)", stopped, inst.SessionPath)
	}
	f, err := session.Read(stopped.SessionPath)
	if err != nil {
		t.Fatalf("session file not readable (not resumable): %v", err)
	}
	raw, _ := os.ReadFile(stopped.SessionPath)
	for _, want := range []string{"bash: echo tool-ran", "tool-ran", "Revision requested", "revised answer"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("session history lacks %q", want)
		}
	}
	if len(f.Entries) < 6 {
		t.Errorf("session has %d entries", len(f.Entries))
	}
}

// Isolation with the real pi: two isolated workers on one repository
// each write the same file with pi's own write tool, in their own
// worktrees; the user's tree is untouched, each task_done has its diff
// stat, and a merge delivery lands the first one on main.
func TestRealPiIsolatedWorkers(t *testing.T) {
	h, srv := realPiHarness(t)
	c := h.dial(t)
	c.hello()
	repo := gitRepo(t)
	for i, who := range []string{"alpha", "beta"} {
		in := c.mustSpawn("s"+who, repo, "faux", isolatedSpawn(func(f *transport.SpawnFrame) {
			f.Env = map[string]string{"PI_FLEET_SERVER": srv.URL}
		}))
		c.rpc(in.InstanceID, "t-"+who, prompt("p", "write: f.txt by "+who+"\nsay: done"))
		td := nextOf[*transport.TaskDoneFrame](c, func(f *transport.TaskDoneFrame) bool { return f.TaskID == "t-"+who })
		c.ack(td)
		if td.Status != transport.TaskSettled || td.Worktree == nil || td.Worktree.Files != 1 {
			t.Fatalf("task %d: %+v %+v", i, td, td.Worktree)
		}
		if b, err := os.ReadFile(filepath.Join(in.Worktree.Path, "f.txt")); err != nil || !strings.Contains(string(b), "by "+who) {
			t.Errorf("%s's worktree f.txt: %q %v", who, b, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "f.txt")); string(b) != "one\ntwo\nthree\n" {
		t.Errorf("the user's f.txt: %q", b)
	}
	acc := &transport.TaskAcceptFrame{TaskID: "t-alpha", Disposition: transport.DispositionStop, Deliver: transport.DeliverMerge}
	acc.ID = "acc"
	c.send(acc)
	nextOf[*transport.DeliveredFrame](c, nil)
	c.reply("acc")
	if got := runGit(t, repo, "show", "main:f.txt"); !strings.Contains(got, "by alpha") {
		t.Errorf("main after the merge: %q", got)
	}
}
