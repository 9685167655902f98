//go:build unix

package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"net/netip"

	"example.com/pifleet/internal/testnet"
	"example.com/pifleet/transport"
)

// Checklist 2.10 items 105–113 through the agent: fs_* answered from the
// instance's cwd with the reference's containment and caps.
func TestFileService_105_to_113(t *testing.T) {
	h := newHarness(t, hopts{})
	cwd := h.cwd
	write := func(rel, content string) {
		p := filepath.Join(cwd, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	png := []byte("\x89PNG\r\n\x1a\nfakepng")
	write("hello.txt", "line1\nline2\nline3")
	write("shot.png", string(png))
	write("src/app.ts", "export const app = 1;\n")
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "init")
	write("hello.txt", "line1\nCHANGED\nline3")
	os.WriteFile(filepath.Join(cwd, ".gitignore"), []byte("big/\n"), 0o644)

	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", cwd, "default", nil)
	id := inst.InstanceID
	ask := func(f transport.Frame, rid string) *transport.FsResultFrame {
		t.Helper()
		f.Envelope().ID = rid
		c.send(f)
		r := c.reply(rid).(*transport.FsResultFrame)
		if !r.Done {
			t.Fatalf("%s: done false", rid)
		}
		return r
	}
	r := ask(&transport.FsReadFrame{InstanceID: id, Path: "hello.txt", Offset: new(1.0), Limit: new(1.0)}, "105")
	if r.Text == nil || *r.Text != "CHANGED" || !r.Truncated {
		t.Errorf("105: %+v", r)
	}
	if r = ask(&transport.FsReadFrame{InstanceID: id, Path: "../outside.txt"}, "106a"); r.Error == nil || r.Error.Code != "path_escape" {
		t.Errorf("106 escape: %+v", r.Error)
	}
	if r = ask(&transport.FsReadFrame{InstanceID: "i-nope", Path: "hello.txt"}, "106b"); r.Error == nil || r.Error.Code != "unknown_instance" {
		t.Errorf("106 unknown: %+v", r.Error)
	}
	if r = ask(&transport.FsReadFrame{InstanceID: id, Path: "shot.png"}, "107"); r.Mime != "image/png" || r.Base64 != base64.StdEncoding.EncodeToString(png) {
		t.Errorf("107: %+v", r)
	}
	r = ask(&transport.FsListFrame{InstanceID: id, Path: "."}, "108")
	var names []string
	for _, e := range r.Entries {
		if e.Name != ".git" && e.Name != ".gitignore" {
			names = append(names, e.Name)
		}
	}
	if strings.Join(names, ",") != "hello.txt,shot.png,src" {
		t.Errorf("108: %v", names)
	}
	if r = ask(&transport.FsGrepFrame{InstanceID: id, Pattern: "app", Glob: "**/*.ts"}, "109"); r.Text == nil || !strings.Contains(*r.Text, "src/app.ts:1:") {
		t.Errorf("109: %+v", r)
	}
	if r = ask(&transport.FsDiffFrame{InstanceID: id, Stat: true}, "110a"); r.Text == nil || !strings.Contains(*r.Text, "hello.txt") {
		t.Errorf("110 stat: %+v", r)
	}
	if r = ask(&transport.FsDiffFrame{InstanceID: id}, "110b"); r.Text == nil || !strings.Contains(*r.Text, "+CHANGED") {
		t.Errorf("110 diff: %+v", r)
	}
	var many strings.Builder
	for i := range 500 {
		many.WriteString("match " + strconv.Itoa(i) + "\n")
	}
	write("big/many.txt", many.String())
	if r = ask(&transport.FsGrepFrame{InstanceID: id, Pattern: "match", Glob: "big/*"}, "111"); r.Text == nil || strings.Count(*r.Text, "\n")+1 != 200 || !r.Truncated {
		t.Errorf("111: truncated=%v lines=%d", r.Truncated, strings.Count(*r.Text, "\n")+1)
	}
	write("big/long.txt", strings.Repeat("x", 200<<10))
	if r = ask(&transport.FsReadFrame{InstanceID: id, Path: "big/long.txt"}, "112"); r.Text == nil || len(*r.Text) > 51200 || !r.Truncated {
		t.Errorf("112: %d bytes truncated=%v", len(*r.Text), r.Truncated)
	}
	if r = ask(&transport.FsDiffFrame{InstanceID: id, RevParse: true}, "113"); r.Text == nil || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(*r.Text) {
		t.Errorf("113: %+v", r)
	}
}

// AC-3.4a: fsAccess off refuses every fs request.
func TestFileServiceOff(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.FsAccess = FsOff }})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	f := &transport.FsReadFrame{InstanceID: inst.InstanceID, Path: "x"}
	f.ID = "r"
	c.send(f)
	if r := c.reply("r").(*transport.FsResultFrame); r.Error == nil || r.Error.Code != "fs_disabled" {
		t.Fatalf("%+v", r.Error)
	}
}

// Checklist 2.11 items 114, 116, 118, 120, 121: get_state answered with
// the session file; switch_session and clone reach the worker;
// set_model and set_thinking_level round-trip; the sessions_report lists
// the session files; session_search finds exactly the matching session.
func TestSessionsAndModel_114_116_118_120_121(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	id := inst.InstanceID
	c.rpc(id, "", map[string]any{"type": "get_state", "id": "gs"})
	_, e := c.nextEvent(id, func(e event) bool { return e.ID == "gs" })
	var st struct {
		SessionFile string `json:"sessionFile"`
		Model       struct{ Provider, ID string }
	}
	json.Unmarshal(e.Data, &st)
	if st.SessionFile != inst.SessionPath || st.Model.ID != "faux-1" {
		t.Fatalf("114: get_state %s (spawned said %s)", e.Data, inst.SessionPath)
	}
	if !strings.HasPrefix(st.SessionFile, h.cfg.SessionsRoot) {
		t.Errorf("session %s is not under the sessions root %s", st.SessionFile, h.cfg.SessionsRoot)
	}
	c.rpc(id, "", prompt("p", "say: needle-in-haystack"))
	c.nextEvent(id, typeIs("agent_settled"))

	c.rpc(id, "", map[string]any{"type": "set_model", "id": "sm", "provider": "faux", "modelId": "faux-1"})
	c.rpc(id, "", map[string]any{"type": "set_thinking_level", "id": "st", "level": "high"})
	for _, rid := range []string{"sm", "st"} {
		if _, e := c.nextEvent(id, func(e event) bool { return e.ID == rid }); !e.Success {
			t.Errorf("118: %s failed", rid)
		}
	}
	c2 := h.dial(t)
	c2.hello()
	rep := nextOf[*transport.SessionsReportFrame](c2, nil)
	if !rep.Full || len(rep.Sessions) != 1 {
		t.Fatalf("120: report %+v", rep.Sessions)
	}
	for _, s := range rep.Sessions {
		if !strings.HasSuffix(s.Path, ".jsonl") || s.SessionID == "" {
			t.Errorf("120: %+v", s)
		}
	}
	q := &transport.SessionSearchFrame{Query: "NEEDLE-in"}
	q.ID = "q"
	c2.send(q)
	hits := c2.reply("q").(*transport.SessionHitsFrame)
	if len(hits.Hits) != 1 || !strings.Contains(strings.ToLower(hits.Hits[0].Snippet), "needle-in-haystack") {
		t.Fatalf("121: %+v", hits.Hits)
	}
	c.rpc(id, "", map[string]any{"type": "clone", "id": "cl"})
	_, e = c.nextEvent(id, func(e event) bool { return e.ID == "cl" })
	if !e.Success {
		t.Errorf("116: clone failed")
	}
	c.rpc(id, "", map[string]any{"type": "switch_session", "id": "sw", "sessionPath": inst.SessionPath})
	if _, e = c.nextEvent(id, func(e event) bool { return e.ID == "sw" }); !e.Success {
		t.Errorf("116: switch_session failed: %s", e.Data)
	}
	// after the clone, a new connection's report lists both files
	c3 := h.dial(t)
	c3.hello()
	if rep := nextOf[*transport.SessionsReportFrame](c3, nil); len(rep.Sessions) != 2 {
		t.Fatalf("120: report after clone %+v", rep.Sessions)
	}

}

// Item 117 and the other spawn refusals: each is a spawn_error with a
// named code, sent before any worker starts.
func TestSpawnRefusals_117(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	file := filepath.Join(h.cwd, "file.txt")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		name, bundle, cwd, code, text string
		mod                           func(*transport.SpawnFrame)
	}{
		{"117 platform", "fakeos", h.cwd, CodePlatformMismatch, "targets [fake-os]", nil},
		{"missing cwd", "default", h.cwd + "/nope", CodeBadCwd, "nope", nil},
		{"cwd not a dir", "default", file, CodeBadCwd, "not a directory", nil},
		{"pinned hash", "default", h.cwd, CodeBundleHashMismatch, "hash mismatch", func(f *transport.SpawnFrame) { f.BundleHash = strings.Repeat("0", 64) }},
		{"unknown bundle", "nosuch", h.cwd, CodeBundleSyncFailed, "nosuch", nil},
		{"AC-4.5 no usable model", "default", h.cwd, CodeNoUsableModel, "tried nope/x", func(f *transport.SpawnFrame) {
			f.Model = &transport.ModelRef{Provider: "nope", ID: "x"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := c.spawn("s-"+tc.name, tc.cwd, tc.bundle, tc.mod).(*transport.SpawnErrorFrame)
			if !ok || e.Code != tc.code || !strings.Contains(e.Message, tc.text) {
				t.Fatalf("got %+v, want %s containing %q", e, tc.code, tc.text)
			}
		})
	}
	if l := c.roundTrip("l"); len(l.Instances) != 0 {
		t.Fatalf("a refused spawn left instances: %+v", l.Instances)
	}
}

// A pifleet server (its hello announces pifleet-v1) gets spawn_progress
// frames echoing the spawn id before spawned.
func TestSpawnProgress(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dialPifleet(t)
	c.hello()
	c.mustSpawn("sp", h.cwd, "default", nil)
	var phases []string
	for _, f := range c.seen {
		if p, ok := f.(*transport.SpawnProgressFrame); ok {
			if p.SpawnID != "sp" || p.ID != "" {
				t.Errorf("progress %+v", p)
			}
			if len(phases) == 0 || phases[len(phases)-1] != string(p.Phase) {
				phases = append(phases, string(p.Phase))
			}
		}
	}
	if strings.Join(phases, ",") != "accepted,provisioning,starting" {
		t.Fatalf("phases %v", phases)
	}
}

// Seed §6: events carry a seq, and events_since replays the ring after it.
func TestEventsSince(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	c.rpc(inst.InstanceID, "", prompt("p", "say: one"))
	c.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	c.close()

	d := h.dial(t)
	d.hello()
	q := &transport.EventsSinceFrame{InstanceID: inst.InstanceID, Since: 0}
	q.ID = "since"
	d.send(q)
	done := d.reply("since").(*transport.EventsReplayedFrame)
	var types []string
	for _, f := range d.seen {
		if ev, ok := f.(*transport.EventFrame); ok && ev.InstanceID == inst.InstanceID {
			types = append(types, decodeEvent(t, ev).Type)
		}
	}
	if int(done.Count) != len(types) || done.Missed != 0 || done.LastSeq == 0 {
		t.Fatalf("events_replayed %+v, %d events", done, len(types))
	}
	joined := strings.Join(types, ",")
	if !strings.Contains(joined, "agent_start") || !strings.HasSuffix(joined, "agent_settled") {
		t.Fatalf("replayed %v", types)
	}
}

// AC-3.5.7: session_entries returns the entries after an entry id.
func TestSessionEntries(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	c.rpc(inst.InstanceID, "", prompt("p", "say: first"))
	c.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	q := &transport.SessionEntriesFrame{InstanceID: inst.InstanceID}
	q.ID = "e1"
	c.send(q)
	r := c.reply("e1").(*transport.SessionEntriesResultFrame)
	var all []struct{ ID, Type string }
	if err := json.Unmarshal(r.Entries, &all); err != nil || len(all) < 2 || r.Error != nil {
		t.Fatalf("entries %s %+v", r.Entries, r.Error)
	}
	c.rpc(inst.InstanceID, "", prompt("p2", "say: second"))
	c.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	q = &transport.SessionEntriesFrame{InstanceID: inst.InstanceID, After: r.LastEntryID}
	q.ID = "e2"
	c.send(q)
	r2 := c.reply("e2").(*transport.SessionEntriesResultFrame)
	if !strings.Contains(string(r2.Entries), "second") || strings.Contains(string(r2.Entries), "first") {
		t.Fatalf("entries after %s: %s", r.LastEntryID, r2.Entries)
	}
	q = &transport.SessionEntriesFrame{Path: "/etc/passwd"}
	q.ID = "e3"
	c.send(q)
	if r3 := c.reply("e3").(*transport.SessionEntriesResultFrame); r3.Error == nil || r3.Error.Code != "path_escape" {
		t.Fatalf("outside the sessions root: %+v", r3.Error)
	}
}

// draftDone dials a fresh agent, spawns a worker and runs task t-rev to
// its acknowledged task_done: the draft a rejection then revises.
func draftDone(t *testing.T) (*client, transport.InstanceInfo, *transport.TaskDoneFrame) {
	t.Helper()
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	c.rpc(inst.InstanceID, "t-rev", prompt("p", "say: draft"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	c.ack(td)
	return c, inst, td
}

// Seed §7 review cycle: task_reject sends the feedback into the same
// session (history intact) under the same task id; task_accept with stop
// stops the worker; deliver other than none is refused.
func TestRejectThenAccept(t *testing.T) {
	c, _, td := draftDone(t)
	c.send(&transport.TaskRejectFrame{TaskID: "t-rev", Feedback: "say: revised"})
	td2 := awaitTaskDone(c, td)
	if td2.TaskID != "t-rev" || td2.LastAssistantMessage != "revised" {
		t.Fatalf("revision %+v", td2)
	}
	c.ack(td2)
	bad := &transport.TaskAcceptFrame{TaskID: "t-rev", Disposition: transport.DispositionStop, Deliver: transport.DeliverPR}
	bad.ID = "acc-pr"
	c.send(bad)
	if e := c.reply("acc-pr").(*transport.ErrorFrame); e.Code != CodeDeliverUnsupported {
		t.Fatalf("deliver pr: %+v", e)
	}
	acc := &transport.TaskAcceptFrame{TaskID: "t-rev", Disposition: transport.DispositionStop, Deliver: transport.DeliverNone}
	acc.ID = "acc"
	c.send(acc)
	st := c.reply("acc").(*transport.StoppedFrame)
	if st.Forced || st.SessionPath == "" {
		t.Fatalf("stopped %+v", st)
	}
	data, err := os.ReadFile(st.SessionPath)
	if err != nil || !strings.Contains(string(data), "draft") || !strings.Contains(string(data), "Revision requested") {
		t.Fatalf("session history lost: %v", err)
	}
}

// AC-3.11: a worker dialog is forwarded as ui_request and answered with
// ui_response.
func TestDialog(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	c.rpc(inst.InstanceID, "", prompt("p", "/faux-ui"))
	req := nextOf[*transport.UIRequestFrame](c, nil)
	if req.InstanceID != inst.InstanceID || req.Kind != transport.UIConfirm || req.Title != "faux-ui" {
		t.Fatalf("ui_request %+v", req)
	}
	c.send(&transport.UIResponseFrame{InstanceID: inst.InstanceID, RequestID: req.RequestID, Value: json.RawMessage("true")})
	c.nextEvent(inst.InstanceID, func(e event) bool {
		return e.Type == "extension_ui_request" && e.Method == "notify" && strings.Contains(string(mustJSON(e)), "confirmed")
	})
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// AC-4.2 and AC-4.7: set_tools restarts the worker with --tools on the
// same session; model_pin makes set_model a model_pinned error.
func TestToolsAndModelPin(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	f := &transport.SetToolsFrame{InstanceID: inst.InstanceID, Tools: []string{"read"}}
	f.ID = "tools"
	c.send(f)
	ts, ok := c.reply("tools").(*transport.ToolsSetFrame)
	if !ok || strings.Join(ts.Tools, ",") != "read" {
		t.Fatalf("tools_set %+v", ts)
	}
	l := c.roundTrip("l")
	if l.Instances[0].State != transport.InstanceRunning || l.Instances[0].SessionPath != inst.SessionPath {
		t.Fatalf("after set_tools: %+v", l.Instances[0])
	}
	pin := &transport.ModelPinFrame{InstanceID: inst.InstanceID, Pin: true}
	pin.ID = "pin"
	c.send(pin)
	if p := c.reply("pin").(*transport.ModelPinnedFrame); !p.Pin || p.Model == nil || p.Model.ID != "faux-1" {
		t.Fatalf("model_pinned %+v", p)
	}
	c.rpc(inst.InstanceID, "", map[string]any{"type": "set_model", "id": "sm", "provider": "faux", "modelId": "faux-1"})
	if e := nextOf[*transport.ErrorFrame](c, nil); e.Code != CodeModelPinned {
		t.Fatalf("set_model while pinned: %+v", e)
	}
}

// AC-4.1: rebundle switches to bundle B on the same session; a failed
// sync keeps bundle A and reports the error.
func TestRebundle(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	f := &transport.RebundleFrame{InstanceID: inst.InstanceID, Bundle: "narrow"}
	f.ID = "rb"
	c.send(f)
	r := c.reply("rb").(*transport.RebundledFrame)
	if !r.Switched || r.Bundle != "narrow" || r.Error != nil {
		t.Fatalf("rebundled %+v %+v", r, r.Error)
	}
	f = &transport.RebundleFrame{InstanceID: inst.InstanceID, Bundle: "nosuch"}
	f.ID = "rb2"
	c.send(f)
	r = c.reply("rb2").(*transport.RebundledFrame)
	if r.Switched || r.Bundle != "narrow" || r.Error == nil {
		t.Fatalf("failed rebundle %+v", r)
	}
	l := c.roundTrip("l")
	if l.Instances[0].Bundle != "narrow" || l.Instances[0].State != transport.InstanceRunning || l.Instances[0].SessionPath != inst.SessionPath {
		t.Fatalf("after rebundle: %+v", l.Instances[0])
	}
}

// Frames the agent does not serve: exec_* is exec_disabled (the exec plane
// is off by default), rpc to an unknown instance is unknown_instance,
// anything else unexpected_frame; an error frame is never answered.
func TestRefusedFrames(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	x := &transport.ExecStartFrame{Mode: transport.ExecArgv, Cwd: "/", Executable: "ls"}
	x.ID = "x"
	c.send(x)
	if e := c.reply("x").(*transport.ErrorFrame); e.Code != CodeExecDisabled {
		t.Fatalf("exec_start: %+v", e)
	}
	c.send(&transport.ErrorFrame{Code: "whatever", Message: "m"})
	c.send(&transport.RPCFrame{InstanceID: "i-none", Command: json.RawMessage(`{"type":"get_state"}`)})
	if e := nextOf[*transport.ErrorFrame](c, nil); e.Code != CodeUnknownInstance || e.ID != "" {
		t.Fatalf("rpc unknown: %+v", e)
	}
	c.send(&transport.SpawnedFrame{Instance: transport.InstanceInfo{InstanceID: "i", Cwd: "/", State: "running"}})
	if e := nextOf[*transport.ErrorFrame](c, nil); e.Code != CodeUnexpectedFrame {
		t.Fatalf("spawned: %+v", e)
	}
}

// Item 77 (AC-2.1): when the IP provider reports a new address the agent
// listens there; new connections work and the earlier worker still runs.
func TestRebind_77(t *testing.T) {
	_, p, _ := net.SplitHostPort(testnet.UnusedAddr(t, "127.0.0.1"))
	port, _ := strconv.Atoi(p)
	var ip atomic.Value
	ip.Store(netip.MustParseAddr("127.0.0.1"))
	bound := make(chan string, 4)
	h := newHarness(t, hopts{static: "127.0.0.1=" + pinned + ",127.0.0.2=" + pinned, noRun: true, mod: func(c *Config) {
		c.Listen, c.Port = "", port
		c.RebindInterval = 20 * time.Millisecond
		c.IPProvider = func(context.Context) (netip.Addr, error) { return ip.Load().(netip.Addr), nil }
	}})
	h.a.hooks.bound = func(a net.Addr) { bound <- a.String() }
	h.run()
	if got := <-bound; got != "127.0.0.1:"+strconv.Itoa(port) {
		t.Fatalf("bound %s", got)
	}
	// AC-2.1: bound to the provided address only, not every interface
	if nc, err := net.Dial("tcp", "127.0.0.2:"+strconv.Itoa(port)); err == nil {
		nc.Close()
		t.Fatal("the agent accepts on an address it was not given")
	}
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	ip.Store(netip.MustParseAddr("127.0.0.2"))
	select {
	case got := <-bound:
		if got != "127.0.0.2:"+strconv.Itoa(port) {
			t.Fatalf("rebound to %s", got)
		}
	case <-time.After(waitLimit):
		t.Fatal("never rebound")
	}
	d := dialAddr(t, "127.0.0.2:"+strconv.Itoa(port), "127.0.0.2")
	d.hello()
	l := d.roundTrip("l")
	if l.Instances[0].InstanceID != inst.InstanceID || l.Instances[0].State != transport.InstanceRunning {
		t.Fatalf("after rebind %+v", l.Instances)
	}
	// the old connection was left alone
	c.roundTrip("old")
}

// AC-3.12 from the bundle manifest, and AC-4.5's fallback walk: bundle
// "turns" names an unusable primary model and faux-1 as fallback, and
// allows one turn; a prompt with a tool call needs two.
func TestManifestBudgetAndFallback(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "turns", nil)
	if inst.Model == nil || inst.Model.Provider != "faux" {
		t.Fatalf("model %+v, want the fallback faux/faux-1", inst.Model)
	}
	c.rpc(inst.InstanceID, "t-turns", prompt("p", "bash: echo one"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.Status != transport.TaskBudgetExceeded || !strings.Contains(td.Summary, "maxTurns") {
		t.Fatalf("task_done %+v", td)
	}
	// hello of a later connection lists the models pi reported
	d := h.dial(t)
	if hello := d.hello(); len(hello.AvailableModels) == 0 || hello.AvailableModels[0].ID != "faux-1" {
		t.Fatalf("availableModels %+v", hello.AvailableModels)
	}
}

// AC-3.11: an unanswered dialog gets its safe default after the timeout,
// the worker goes on, and the open task is reported escalated.
func TestDialogTimeoutEscalates(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.DialogTimeout = 50 * time.Millisecond }})
	c := h.dialPifleet(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	// the dialog of a task (an extension command: no run of its own, it
	// settles when its answer comes) times out…
	c.rpc(inst.InstanceID, "t-ui", prompt("p", "/faux-ui"))
	nextOf[*transport.UIRequestFrame](c, nil)
	c.nextEvent(inst.InstanceID, func(e event) bool { return e.Method == "notify" })
	// …and the task's settle reports it
	esc := nextOf[*transport.TaskEscalatedFrame](c, nil)
	if esc.TaskID != "t-ui" || esc.InstanceID != inst.InstanceID {
		t.Fatalf("task_escalated %+v", esc)
	}
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.TaskID != "t-ui" {
		t.Fatalf("task_done %+v", td)
	}
}

// fromSession: the worker starts on a copy (clone) of the given session;
// the source file is never written to.
func TestFromSessionClones(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	first := c.mustSpawn("s1", h.cwd, "default", nil)
	c.rpc(first.InstanceID, "", prompt("p", "say: baseline"))
	c.nextEvent(first.InstanceID, typeIs("agent_settled"))
	before, err := os.ReadFile(first.SessionPath)
	if err != nil {
		t.Fatal(err)
	}
	second := c.mustSpawn("s2", h.cwd, "default", func(f *transport.SpawnFrame) { f.FromSession = first.SessionPath })
	if second.SessionPath == "" || second.SessionPath == first.SessionPath {
		t.Fatalf("fromSession spawn runs on %q (source %q)", second.SessionPath, first.SessionPath)
	}
	c.rpc(second.InstanceID, "", prompt("p2", "say: on the copy"))
	c.nextEvent(second.InstanceID, typeIs("agent_settled"))
	after, _ := os.ReadFile(first.SessionPath)
	if string(after) != string(before) {
		t.Fatal("the source session was written to")
	}
	copyData, _ := os.ReadFile(second.SessionPath)
	if !strings.Contains(string(copyData), "baseline") || !strings.Contains(string(copyData), "on the copy") {
		t.Fatal("the clone lacks the history or the new turn")
	}
}

// AC-3.5.4: a pifleet server gets incremental sessions_reports
// (full:false) when session files appear or change.
func TestIncrementalSessionsReport(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.SessionsPoll = 20 * time.Millisecond }})
	c := h.dialPifleet(t)
	c.hello()
	nextOf[*transport.SessionsReportFrame](c, func(r *transport.SessionsReportFrame) bool { return r.Full })
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	c.rpc(inst.InstanceID, "", prompt("p", "say: hello"))
	r := nextOf[*transport.SessionsReportFrame](c, func(r *transport.SessionsReportFrame) bool {
		return !r.Full && len(r.Sessions) > 0 && r.Sessions[0].Path == inst.SessionPath
	})
	if r.Machine != "worker-01" {
		t.Fatalf("report %+v", r)
	}
	os.Remove(inst.SessionPath)
	rm := nextOf[*transport.SessionsRemovedFrame](c, nil)
	if len(rm.Paths) != 1 || rm.Paths[0] != inst.SessionPath {
		t.Fatalf("sessions_removed %+v", rm)
	}
}

// A server that is not known to be a pifleet server gets one
// sessions_report of the newest 200 sessions, as from the TS agent.
func TestSessionsReportCap(t *testing.T) {
	h := newHarness(t, hopts{noRun: true})
	dir := filepath.Join(h.cfg.SessionsRoot, "--w--")
	os.MkdirAll(dir, 0o755)
	for i := range 250 {
		id := fmt.Sprintf("01a228e5-0000-7000-8000-%012d", i)
		line := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`+"\n", id)
		p := filepath.Join(dir, id+".jsonl")
		os.WriteFile(p, []byte(line), 0o644)
		mt := time.Unix(1_700_000_000+int64(i), 0)
		os.Chtimes(p, mt, mt)
	}
	h.run()
	c := h.dial(t)
	c.hello()
	r := nextOf[*transport.SessionsReportFrame](c, nil)
	if !r.Full || len(r.Sessions) != 200 || !strings.HasSuffix(r.Sessions[0].SessionID, "000000000249") {
		t.Fatalf("report: full=%v %d sessions, first %+v", r.Full, len(r.Sessions), r.Sessions[0])
	}
	c.roundTrip("l")
	for _, f := range c.seen {
		if _, ok := f.(*transport.SessionsReportFrame); ok {
			t.Fatal("a second report page went to a server that is not a pifleet server")
		}
	}
}

// Seed §10 "unchanged": when the worker cannot be restarted with bundle B,
// it is brought back on bundle A and its session, and the error reported.
func TestRebundleRestartFailsKeepsA(t *testing.T) {
	var broken atomic.Bool
	h := newHarness(t, hopts{noRun: true})
	h.a.hooks.command = func(argv []string) []string {
		if broken.Load() {
			argv[0] = "/nonexistent/pi"
		}
		return argv
	}
	h.run()
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	c.rpc(inst.InstanceID, "", prompt("p", "say: before"))
	c.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	broken.Store(true)
	f := &transport.RebundleFrame{InstanceID: inst.InstanceID, Bundle: "narrow"}
	f.ID = "rb"
	c.send(f)
	r := c.reply("rb").(*transport.RebundledFrame)
	if r.Switched || r.Bundle != "default" || r.Error == nil || r.Error.Code != CodeRestartFailed {
		t.Fatalf("rebundled %+v %+v", r, r.Error)
	}
	l := c.roundTrip("l")
	if l.Instances[0].State != transport.InstanceRunning || l.Instances[0].Bundle != "default" {
		t.Fatalf("after a failed restart: %+v", l.Instances[0])
	}
	c.rpc(inst.InstanceID, "", prompt("p2", "say: after"))
	c.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	data, _ := os.ReadFile(inst.SessionPath)
	if !strings.Contains(string(data), "before") || !strings.Contains(string(data), "after") {
		t.Fatal("the session's history was not kept")
	}
}

// A server records a rejection before it sends task_reject; one killed
// after the send sends the same rejection again once restarted (#16): the
// agent carries a rejection id out once, so the worker revises once, and
// the next rejection, under a new id, is the next revision.
func TestTaskRejectWithTheSameRejectionIDRevisesOnce(t *testing.T) {
	c, inst, td := draftDone(t)
	c.send(&transport.TaskRejectFrame{TaskID: "t-rev", Feedback: "say: revised", RejectionID: "t-rev#1"})
	td2 := awaitTaskDone(c, td)
	if td2.LastAssistantMessage != "revised" {
		t.Fatalf("revision %+v", td2)
	}
	c.ack(td2)
	// The restarted server's resend, then its next rejection.
	c.send(&transport.TaskRejectFrame{TaskID: "t-rev", Feedback: "say: revised", RejectionID: "t-rev#1"})
	c.send(&transport.TaskRejectFrame{TaskID: "t-rev", Feedback: "say: third", RejectionID: "t-rev#2"})
	td3 := awaitTaskDone(c, td, td2)
	if td3.LastAssistantMessage != "third" {
		t.Fatalf("after the resent rejection the worker revised again: %+v", td3)
	}
	data, err := os.ReadFile(inst.SessionPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "say: revised"); n != 1 {
		t.Errorf("the session holds the first rejection's feedback %d times, want once", n)
	}
}
