package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/fsmkit"
)

func info(path, id, name string, at Millis) SessionInfo {
	k := KindOf(name)
	return SessionInfo{SessionID: id, Path: path, Name: name, Cwd: "/work/api", Kind: k, Pinned: k == KindBaseline, UpdatedAt: at}
}

// agentView is what a report says about a machine: the agent fields only.
func agentView(recs []Record) []SessionInfo {
	out := []SessionInfo{}
	for _, r := range recs {
		out = append(out, SessionInfo{SessionID: r.SessionID, Path: r.Path, Name: r.Name, Cwd: r.Cwd, Kind: r.Kind,
			Pinned: r.Pinned, ParentSession: r.ParentSession, UpdatedAt: r.UpdatedAt})
	}
	return out
}

func mustApply(t *testing.T, p *Projection, r Report) Changes {
	t.Helper()
	ch, err := p.ApplyReport(r)
	if err != nil {
		t.Fatalf("ApplyReport(%+v): %v", r, err)
	}
	return ch
}

func state(t *testing.T, p *Projection, machine string) RegistryState {
	t.Helper()
	s, ok := p.State(machine)
	if !ok {
		t.Fatalf("machine %s unknown", machine)
	}
	return s
}

func TestFullReportMakesTheProjectionEqualTheAgent(t *testing.T) {
	p := NewProjection()
	p.Connected("m1")
	if s := state(t, p, "m1"); s != StateStaleProjection {
		t.Fatalf("after connect: %s", s)
	}
	first := []SessionInfo{
		info("/s/base.jsonl", "b", "baseline:api", 300),
		info("/s/task.jsonl", "t", "task:t1:fix", 200),
		info("/s/ghost.jsonl", "g", "", 100),
	}
	mustApply(t, p, Report{Machine: "m1", Full: true, Sessions: first})
	if s := state(t, p, "m1"); s != StateSynced {
		t.Fatalf("after full report: %s", s)
	}
	// The server annotates what it knows.
	p.Annotate("m1", "/s/base.jsonl", func(f *ServerFields) { f.GitHead = "abc123"; f.Bundle = "default" })
	p.Annotate("m1", "/s/task.jsonl", func(f *ServerFields) { f.TaskIDs = []string{"t1"}; f.AttachedInstanceID = "i-1" })
	p.Annotate("m1", "/s/ghost.jsonl", func(f *ServerFields) { f.Labels = []string{"old"} })

	// Reconnect: the agent's files changed meanwhile.
	p.ConnectionLost("m1")
	if s := state(t, p, "m1"); s != StateStaleProjection {
		t.Fatalf("after connection lost: %s", s)
	}
	if n := len(p.Sessions("m1")); n != 3 {
		t.Errorf("a stale projection keeps its sessions for reading: %d", n)
	}
	p.Connected("m1")
	second := []SessionInfo{
		info("/s/new.jsonl", "n", "", 500),
		info("/s/task.jsonl", "t", "task:t1:fix", 400), // appended to
		info("/s/base.jsonl", "b", "baseline:api", 300),
	}
	ch := mustApply(t, p, Report{Machine: "m1", Full: true, Sessions: second})

	// Exactly the agent's sessions: no ghost, none missing.
	if d := cmp.Diff(second, agentView(p.Sessions("m1"))); d != "" {
		t.Errorf("projection vs report (-report +projection):\n%s", d)
	}
	// Server fields survive for sessions that still exist.
	base, _ := p.Get("m1", "/s/base.jsonl")
	task, _ := p.Get("m1", "/s/task.jsonl")
	if base.GitHead != "abc123" || base.Bundle != "default" || task.AttachedInstanceID != "i-1" || cmp.Diff([]string{"t1"}, task.TaskIDs) != "" {
		t.Errorf("server fields lost: base %+v task %+v", base.ServerFields, task.ServerFields)
	}
	want := [3][]string{{"/s/new.jsonl"}, {"/s/task.jsonl"}, {"/s/ghost.jsonl"}}
	got := [3][]string{recPaths(ch.Added), recPaths(ch.Updated), recPaths(ch.Removed)}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("changes added/updated/removed (-want +got):\n%s", d)
	}
}

func recPaths(recs []Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Path)
	}
	return out
}

func TestAnotherSessionAtTheSamePathDropsServerFields(t *testing.T) {
	p := NewProjection()
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: []SessionInfo{info("/s/a.jsonl", "old", "", 1)}})
	p.Annotate("m", "/s/a.jsonl", func(f *ServerFields) { f.TaskIDs = []string{"t9"} })
	mustApply(t, p, Report{Machine: "m", Full: false, Sessions: []SessionInfo{info("/s/a.jsonl", "new", "", 2)}})
	rec, _ := p.Get("m", "/s/a.jsonl")
	if rec.SessionID != "new" || rec.TaskIDs != nil {
		t.Errorf("record %+v kept the replaced session's fields", rec)
	}
}

func TestIncrementalReports(t *testing.T) {
	p := NewProjection()
	// Before the full report, an incremental one is stale input.
	_, err := p.ApplyReport(Report{Machine: "m", Sessions: []SessionInfo{info("/s/x.jsonl", "x", "", 1)}})
	var stale *fsmkit.StaleEventError
	if !errors.As(err, &stale) || len(p.Sessions("m")) != 0 {
		t.Fatalf("incremental before full: %v, sessions %v", err, p.Sessions("m"))
	}
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: []SessionInfo{info("/s/a.jsonl", "a", "", 1), info("/s/b.jsonl", "b", "", 1)}})
	ch := mustApply(t, p, Report{Machine: "m",
		Sessions: []SessionInfo{info("/s/c.jsonl", "c", "", 5), info("/s/a.jsonl", "a", "baseline:api", 6)},
		Removed:  []string{"/s/b.jsonl", "/s/unknown.jsonl"}})
	got := [3][]string{recPaths(ch.Added), recPaths(ch.Updated), recPaths(ch.Removed)}
	if d := cmp.Diff([3][]string{{"/s/c.jsonl"}, {"/s/a.jsonl"}, {"/s/b.jsonl"}}, got); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	want := []SessionInfo{info("/s/a.jsonl", "a", "baseline:api", 6), info("/s/c.jsonl", "c", "", 5)}
	if d := cmp.Diff(want, agentView(p.Sessions("m"))); d != "" {
		t.Errorf("projection (-want +got):\n%s", d)
	}
	// An inconsistent incremental report is refused whole.
	_, err = p.ApplyReport(Report{Machine: "m", Sessions: []SessionInfo{info("/s/d.jsonl", "d", "", 7)}, Removed: []string{"/s/d.jsonl"}})
	if !errors.Is(err, ErrInvalidReport) || len(p.Sessions("m")) != 2 || state(t, p, "m") != StateSynced {
		t.Errorf("bad incremental: %v", err)
	}
}

func TestPagedFullReport(t *testing.T) {
	var all []SessionInfo
	for i := range 7 {
		all = append(all, info(fmt.Sprintf("/s/%d.jsonl", i), fmt.Sprint(i), "", Millis(100-i)))
	}
	pages, err := Paginate(all, PageLimits{MaxItems: 3})
	if err != nil || len(pages) != 3 {
		t.Fatalf("pages: %d, %v", len(pages), err)
	}
	p := NewProjection()
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: []SessionInfo{info("/s/ghost.jsonl", "g", "", 1)}})
	p.ConnectionLost("m")
	for i, page := range pages {
		ch := mustApply(t, p, Report{Machine: "m", Full: true, Sessions: page, Page: i, Pages: len(pages)})
		last := i == len(pages)-1
		if s := state(t, p, "m"); (s == StateSynced) != last {
			t.Fatalf("after page %d: %s", i, s)
		}
		if !last && (len(ch.Added) != 0 || len(p.Sessions("m")) != 1) {
			t.Fatalf("page %d applied before the report was complete", i)
		}
	}
	if d := cmp.Diff(all, agentView(p.Sessions("m"))); d != "" {
		t.Errorf("projection (-report +got):\n%s", d)
	}

	// Out of order: rejected, back to stale, nothing applied.
	p.ConnectionLost("m")
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: pages[0], Page: 0, Pages: 3})
	_, err = p.ApplyReport(Report{Machine: "m", Full: true, Sessions: pages[2], Page: 2, Pages: 3})
	if !errors.Is(err, ErrInvalidReport) || state(t, p, "m") != StateStaleProjection || len(p.Sessions("m")) != 7 {
		t.Errorf("page out of order: %v, state %s", err, state(t, p, "m"))
	}
	// A half-received report is dropped by a lost connection.
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: pages[0], Page: 0, Pages: 3})
	p.ConnectionLost("m")
	_, err = p.ApplyReport(Report{Machine: "m", Full: true, Sessions: pages[1], Page: 1, Pages: 3})
	if !errors.Is(err, fsmkit.ErrStaleEvent) {
		t.Errorf("page after the connection was lost: %v", err)
	}
	// Duplicate paths across pages: rejected.
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: pages[0], Page: 0, Pages: 2})
	_, err = p.ApplyReport(Report{Machine: "m", Full: true, Sessions: pages[0], Page: 1, Pages: 2})
	if !errors.Is(err, ErrInvalidReport) || state(t, p, "m") != StateStaleProjection {
		t.Errorf("duplicate paths: %v", err)
	}
}

func TestEmptyFullReportRemovesEverything(t *testing.T) {
	p := NewProjection()
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: []SessionInfo{info("/s/a.jsonl", "a", "", 1)}})
	p.ConnectionLost("m")
	pages, _ := Paginate([]SessionInfo{}, PageLimits{MaxItems: 10})
	ch := mustApply(t, p, Report{Machine: "m", Full: true, Sessions: pages[0]})
	if len(p.Sessions("m")) != 0 || len(ch.Removed) != 1 {
		t.Errorf("empty full report left %v", p.Sessions("m"))
	}
}

func TestCatchUp(t *testing.T) {
	p := NewProjection()
	if err := p.BeginCatchUp("m"); !errors.Is(err, fsmkit.ErrStaleEvent) {
		t.Fatalf("catch-up on a stale projection: %v", err)
	}
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: []SessionInfo{info("/s/a.jsonl", "a", "", 1)}})
	if err := p.BeginCatchUp("m"); err != nil || state(t, p, "m") != StateCatchUp {
		t.Fatalf("BeginCatchUp: %v", err)
	}
	// Reports keep flowing meanwhile.
	mustApply(t, p, Report{Machine: "m", Sessions: []SessionInfo{info("/s/b.jsonl", "b", "", 2)}})
	if err := p.CaughtUp("m", "/s/a.jsonl", "0000abcd"); err != nil || state(t, p, "m") != StateSynced {
		t.Fatalf("CaughtUp: %v", err)
	}
	if rec, _ := p.Get("m", "/s/a.jsonl"); rec.LastEntryID != "0000abcd" {
		t.Errorf("last entry id %q", rec.LastEntryID)
	}
	if err := p.CaughtUp("m", "/s/a.jsonl", "x"); !errors.Is(err, fsmkit.ErrStaleEvent) {
		t.Errorf("second CaughtUp: %v", err)
	}
	// A lost connection during a catch-up: stale.
	_ = p.BeginCatchUp("m")
	p.ConnectionLost("m")
	if s := state(t, p, "m"); s != StateStaleProjection {
		t.Errorf("lost during catch-up: %s", s)
	}
}

func TestPendingServerFieldsWaitForTheSession(t *testing.T) {
	p := NewProjection()
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: []SessionInfo{}})
	// The server cloned a baseline: it knows the new path before pi writes it.
	p.Annotate("m", "/s/clone.jsonl", func(f *ServerFields) { f.TaskIDs = []string{"t42"}; f.BundleHash = "sha256:1" })
	if len(p.Sessions("m")) != 0 {
		t.Fatal("an annotation made a ghost session")
	}
	mustApply(t, p, Report{Machine: "m", Sessions: []SessionInfo{info("/s/clone.jsonl", "c", "task:t42:fix", 5)}})
	rec, ok := p.Get("m", "/s/clone.jsonl")
	if !ok || rec.BundleHash != "sha256:1" || cmp.Diff([]string{"t42"}, rec.TaskIDs) != "" {
		t.Errorf("pending fields not applied: %+v", rec)
	}
}

func TestProjectionJSONRoundTrip(t *testing.T) {
	p := NewProjection()
	base := info("/s/base.jsonl", "b", "baseline:api", 1)
	task := info("/s/task.jsonl", "t", "task:t1:x", 2)
	task.ParentSession = "/s/base.jsonl"
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: []SessionInfo{base, task}})
	p.Annotate("m", "/s/task.jsonl", func(f *ServerFields) { f.PinnedByServer = true; f.Labels = []string{"keep"} })
	p.Annotate("m", "/s/later.jsonl", func(f *ServerFields) { f.GitHead = "def" })
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q := NewProjection()
	if err := json.Unmarshal(b, q); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(p.All(), q.All()); d != "" {
		t.Errorf("round trip (-before +after):\n%s", d)
	}
	if s := state(t, q, "m"); s != StateStaleProjection {
		t.Errorf("a loaded projection is %s, want stale until the agent reports", s)
	}
	rec, _ := q.Get("m", "/s/task.jsonl")
	if wire := rec.Info(); !wire.Pinned || wire.Kind != KindTask {
		t.Errorf("server pin not in the wire info: %+v", wire)
	}
	mustApply(t, q, Report{Machine: "m", Full: true, Sessions: []SessionInfo{info("/s/later.jsonl", "l", "", 9)}})
	if rec, _ := q.Get("m", "/s/later.jsonl"); rec.GitHead != "def" {
		t.Errorf("pending fields lost in the round trip: %+v", rec)
	}
}

func TestLineageAndFindByName(t *testing.T) {
	p := NewProjection()
	base := info("/s/base.jsonl", "b", "baseline:api", 1)
	task := info("/s/task.jsonl", "t", "task:t1:x", 2)
	task.ParentSession = base.Path
	sub := info("/s/sub.jsonl", "s", "", 3)
	sub.ParentSession = task.Path
	mustApply(t, p, Report{Machine: "m", Full: true, Sessions: []SessionInfo{base, task, sub}})
	mustApply(t, p, Report{Machine: "m2", Full: true, Sessions: []SessionInfo{info("/s/base.jsonl", "b2", "baseline:api", 7)}})
	if d := cmp.Diff([]string{"/s/sub.jsonl", "/s/task.jsonl", "/s/base.jsonl"}, recPaths(p.Lineage("m", "/s/sub.jsonl"))); d != "" {
		t.Errorf("lineage (-want +got):\n%s", d)
	}
	found := p.FindByName("baseline:api")
	if len(found) != 2 || found[0].Machine != "m2" || found[1].Machine != "m" {
		t.Errorf("FindByName: %+v", found)
	}
}

func TestWireEncoding(t *testing.T) {
	// Pinned is always present; optional fields are absent, never null;
	// a fractional updatedAt (the TypeScript agent's) decodes.
	b, _ := json.Marshal(SessionInfo{SessionID: "s", Path: "/p", Cwd: "/c", Kind: KindScratch, UpdatedAt: 5})
	if string(b) != `{"sessionId":"s","path":"/p","cwd":"/c","kind":"scratch","pinned":false,"updatedAt":5}` {
		t.Errorf("encoded %s", b)
	}
	var in SessionInfo
	if err := json.Unmarshal([]byte(`{"sessionId":"s","path":"/p","cwd":"/c","kind":"task","pinned":false,"updatedAt":1777626001234.567}`), &in); err != nil || in.UpdatedAt != 1777626001234 {
		t.Errorf("decoded %+v, %v", in, err)
	}
	if err := json.Unmarshal([]byte(`{"updatedAt":"soon"}`), &in); err == nil {
		t.Error("a string updatedAt decoded")
	}
}
