package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/transport"
)

// writeSessions writes n one-line session files under the sessions root.
func writeSessions(t *testing.T, root string, n int) {
	t.Helper()
	dir := filepath.Join(root, "--w--")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("01a228e5-0000-7000-8000-%012d", i)
		line := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`+"\n", id)
		p := filepath.Join(dir, id+".jsonl")
		if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Unix(1_700_000_000+int64(i), 0)
		os.Chtimes(p, mt, mt)
	}
}

// A pifleet server gets the whole inventory as numbered full pages, so
// that it can replace its projection exactly once the last one arrives
// (AC-3.5.4), instead of one page and incremental additions.
func TestFullReportIsPagedForAPifleetServer(t *testing.T) {
	h := newHarness(t, hopts{noRun: true})
	writeSessions(t, h.cfg.SessionsRoot, 450)
	h.run()
	c := h.dialPifleet(t)
	c.hello()
	seen := map[string]bool{}
	for page := 0; page < 3; page++ {
		r := nextOf[*transport.SessionsReportFrame](c, nil)
		if !r.Full || r.Page == nil || r.Pages == nil || int(*r.Page) != page || int(*r.Pages) != 3 {
			t.Fatalf("page %d: full=%v page=%v pages=%v", page, r.Full, r.Page, r.Pages)
		}
		for _, s := range r.Sessions {
			if seen[s.Path] {
				t.Fatalf("%s reported twice", s.Path)
			}
			seen[s.Path] = true
		}
	}
	if len(seen) != 450 {
		t.Fatalf("%d sessions reported, want 450", len(seen))
	}
}

// AC-3.5.3 on the agent: attach to a baseline is refused, attach to a file
// a live worker writes is refused, attach to any other session makes the
// worker append to that very file.
func TestAttachToASession(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	first := c.mustSpawn("s1", h.cwd, "default", nil)
	c.rpc(first.InstanceID, "", prompt("p", "say: hello"))
	c.nextEvent(first.InstanceID, typeIs("agent_settled"))
	attach := func(f *transport.SpawnFrame) {
		f.FromSession, f.SessionMode = first.SessionPath, transport.SessionAttach
	}

	if e, ok := c.spawn("s2", h.cwd, "default", attach).(*transport.SpawnErrorFrame); !ok || e.Code != CodeSessionBusy {
		t.Fatalf("attach to a live worker's session: %+v", e)
	}
	c.send(&transport.StopFrame{Header: transport.Header{ID: "stop"}, InstanceID: first.InstanceID})
	c.reply("stop")
	second := c.mustSpawn("s3", h.cwd, "default", attach)
	if second.SessionPath != first.SessionPath {
		t.Fatalf("attached worker writes %s, want %s", second.SessionPath, first.SessionPath)
	}
	c.rpc(second.InstanceID, "", prompt("p2", "say: appended"))
	c.nextEvent(second.InstanceID, typeIs("agent_settled"))
	data, _ := os.ReadFile(first.SessionPath)
	if !strings.Contains(string(data), "hello") || !strings.Contains(string(data), "appended") {
		t.Fatal("the attached worker did not append to the session")
	}
	c.rpc(second.InstanceID, "", map[string]any{"type": "set_session_name", "name": "baseline:api", "id": "n"})
	c.nextEvent(second.InstanceID, func(e event) bool { return e.Type == "response" && e.ID == "n" })
	c.send(&transport.StopFrame{Header: transport.Header{ID: "stop2"}, InstanceID: second.InstanceID})
	c.reply("stop2")
	if e, ok := c.spawn("s4", h.cwd, "default", attach).(*transport.SpawnErrorFrame); !ok || e.Code != CodeSessionPinned {
		t.Fatalf("attach to a baseline: %+v", e)
	}
}

// repo_head answers the commit of HEAD, or names why there is none.
func TestRepoHead(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	repo := t.TempDir()
	gitc := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@e", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	ask := func(id, cwd string) *transport.RepoHeadResultFrame {
		f := &transport.RepoHeadFrame{Cwd: cwd}
		f.ID = id
		c.send(f)
		return c.reply(id).(*transport.RepoHeadResultFrame)
	}
	gitc("init", "-q")
	if r := ask("empty", repo); r.Error == nil || r.Error.Code != CodeNotARepo {
		t.Fatalf("repository without a commit: %+v", r)
	}
	os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644)
	gitc("add", "f")
	gitc("commit", "-q", "-m", "one")
	if r := ask("ok", repo); r.Error != nil || r.Head != gitc("rev-parse", "HEAD") || r.Cwd != repo {
		t.Fatalf("repo_head %+v %+v", r, r.Error)
	}
	if r := ask("plain", t.TempDir()); r.Error == nil || r.Error.Code != CodeNotARepo {
		t.Fatalf("plain directory: %+v", r)
	}
	if r := ask("missing", filepath.Join(repo, "nope")); r.Error == nil || r.Error.Code != "not_found" {
		t.Fatalf("missing directory: %+v", r)
	}
}

// session_entries pages a big file: every entry once, in order, however
// the answers are cut, each answer resuming where the last one ended; an
// entry no frame can hold is named; a replaced file is unknown_entry.
func TestSessionEntriesPagesAFileExactly(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	dir := filepath.Join(h.cfg.SessionsRoot, "--w--")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "big.jsonl")
	var file strings.Builder
	file.WriteString(`{"type":"session","version":3,"id":"s-big","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}` + "\n")
	var want []string
	pad := strings.Repeat("x", 10_000)
	for i := range 300 {
		line := fmt.Sprintf(`{"type":"custom","id":"e%07d","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","customType":"t","data":%q}`, i, pad)
		want = append(want, line)
		file.WriteString(line + "\n")
	}
	if err := os.WriteFile(path, []byte(file.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ask := func(id, after string) *transport.SessionEntriesResultFrame {
		q := &transport.SessionEntriesFrame{Path: path, After: after}
		q.ID = id
		c.send(q)
		return c.reply(id).(*transport.SessionEntriesResultFrame)
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		r := ask(fmt.Sprintf("p%d", page), after)
		if r.Error != nil {
			t.Fatalf("page %d: %+v", page, r.Error)
		}
		var raws []json.RawMessage
		if err := json.Unmarshal(r.Entries, &raws); err != nil {
			t.Fatal(err)
		}
		for _, raw := range raws {
			got = append(got, string(raw))
		}
		after = r.LastEntryID
		if !r.More {
			break
		}
		if page > 10 {
			t.Fatal("paging never ends")
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%d entries paged, want the file's %d in order", len(got), len(want))
	}
	// Nothing new: an empty answer at the end.
	if r := ask("end", after); r.Error != nil || string(r.Entries) != "[]" || r.More {
		t.Fatalf("after the last entry: %+v", r)
	}
	huge := fmt.Sprintf(`{"type":"custom","id":"huge","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","customType":"t","data":%q}`, strings.Repeat("y", 1<<20))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(huge + "\n")
	f.Close()
	if r := ask("huge", after); r.Error == nil || r.Error.Code != "entry_too_large" || !strings.Contains(r.Error.Message, "huge") {
		t.Fatalf("an entry larger than a frame: %+v", r.Error)
	}
	if err := os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"s-new","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := ask("replaced", after); r.Error == nil || r.Error.Code != "unknown_entry" {
		t.Fatalf("a replaced file: %+v", r.Error)
	}
}
