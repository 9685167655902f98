package fleet_test

import (
	"errors"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
)

// filesPeer answers the file-service frames the plain test peer does not:
// fs_grep, session_search, repo_head (HEAD "c2" in /repo, not a repository
// elsewhere); a read of "confused" is answered with the wrong frame.
func filesPeer(t *testing.T, pifleet bool) *testAgentPeer {
	p := newTestAgentPeer(t, "box", pifleet)
	p.mu.Lock()
	p.script = func(c *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
		switch fr := fr.(type) {
		case *transport.FsGrepFrame:
			text := "main.go:1:" + fr.Pattern + " in " + fr.Glob
			reply(&transport.FsResultFrame{Done: true, Text: &text, Truncated: true})
		case *transport.SessionSearchFrame:
			reply(&transport.SessionHitsFrame{Hits: []transport.SessionHit{{SessionID: "s-1", Path: fr.Cwd + "/s.jsonl", Snippet: fr.Query}}})
		case *transport.RepoHeadFrame:
			if fr.Cwd != "/repo" {
				reply(&transport.RepoHeadResultFrame{Cwd: fr.Cwd, Error: &transport.FsError{Code: "not_a_repo", Message: fr.Cwd}})
				return true
			}
			reply(&transport.RepoHeadResultFrame{Cwd: fr.Cwd, Head: "c2"})
		case *transport.FsReadFrame:
			if fr.Path != "confused" {
				return false
			}
			reply(&transport.ToolsSetFrame{InstanceID: fr.InstanceID})
		default:
			return false
		}
		return true
	}
	p.mu.Unlock()
	return p
}

// TestFileServiceRequestsAndAnswers: what Read, Grep, SearchSessions and
// IsStale send and how they read the answers, bad paging refused before
// any frame, a wrong answer named.
func TestFileServiceRequestsAndAnswers(t *testing.T) {
	peer := filesPeer(t, true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	ctx := t.Context()

	drainFrames(peer)
	if _, err := inst.Read(ctx, "a.go", fleet.ReadOptions{Offset: 10, Limit: 5}); err != nil {
		t.Fatal(err)
	}
	if fr := nextFrame[*transport.FsReadFrame](t, peer); fr.Offset == nil || *fr.Offset != 10 || fr.Limit == nil || *fr.Limit != 5 || fr.InstanceID != inst.ID() {
		t.Errorf("fs_read = %+v", fr)
	}
	if _, err := inst.Read(ctx, "a.go", fleet.ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	if fr := nextFrame[*transport.FsReadFrame](t, peer); fr.Offset != nil || fr.Limit != nil {
		t.Errorf("fs_read without paging = %+v, want neither offset nor limit", fr)
	}
	if _, err := inst.Read(ctx, "a.go", fleet.ReadOptions{Offset: -1}); !errors.Is(err, fleet.ErrInvalidConfig) {
		t.Errorf("negative offset: %v, want ErrInvalidConfig", err)
	}
	if _, err := inst.Read(ctx, "confused", fleet.ReadOptions{}); err == nil || !strings.Contains(err.Error(), "tools_set") {
		t.Errorf("fs_read answered with tools_set: %v", err)
	}
	res, err := inst.Grep(ctx, "TODO", "*.go")
	if err != nil || res.Text == nil || *res.Text != "main.go:1:TODO in *.go" || !res.Truncated {
		t.Errorf("Grep = %+v, %v", res, err)
	}

	hits, err := tf.SearchSessions(ctx, "box", "flaky test", "/repo")
	if err != nil || len(hits) != 1 || hits[0].Snippet != "flaky test" || hits[0].Path != "/repo/s.jsonl" {
		t.Errorf("SearchSessions = %+v, %v", hits, err)
	}
	if _, err := tf.SearchSessions(ctx, "nowhere", "x", ""); !errors.Is(err, fleet.ErrUnknownAgent) {
		t.Errorf("SearchSessions of an unknown agent: %v", err)
	}

	base := session.Record{Kind: session.KindBaseline, Machine: "box", Cwd: "/repo", ServerFields: session.ServerFields{GitHead: "c1"}}
	if stale, err := tf.IsStale(ctx, base); err != nil || !stale {
		t.Errorf("baseline at c1, HEAD c2: IsStale = %v, %v", stale, err)
	}
	base.GitHead = "c2"
	if stale, err := tf.IsStale(ctx, base); err != nil || stale {
		t.Errorf("baseline at HEAD: IsStale = %v, %v", stale, err)
	}
	drainFrames(peer)
	for _, r := range []session.Record{{Kind: session.KindTask, Machine: "box", Cwd: "/repo", ServerFields: session.ServerFields{GitHead: "c1"}}, {Kind: session.KindBaseline, Machine: "box", Cwd: "/tmp"}} {
		if stale, err := tf.IsStale(ctx, r); err != nil || stale {
			t.Errorf("IsStale(%+v) = %v, %v; a task session or a baseline without a HEAD is never stale", r, stale, err)
		}
	}
	base.Cwd = "/elsewhere"
	var fe *fleet.FileError
	if _, err := tf.IsStale(ctx, base); !errors.As(err, &fe) || fe.Code != "not_a_repo" {
		t.Errorf("IsStale outside a repository: %v, want a not_a_repo *FileError", err)
	}
	for _, fr := range drainFrames(peer) {
		if rh, ok := fr.(*transport.RepoHeadFrame); ok && rh.Cwd != "/elsewhere" {
			t.Errorf("repo_head sent for a record that cannot be stale: %+v", rh)
		}
	}
}

// TestRepoHeadNeedsAPifleetAgent: a v1 agent has no repo_head.
func TestRepoHeadNeedsAPifleetAgent(t *testing.T) {
	peer := filesPeer(t, false)
	tf := newTestFleet(t, peer)
	if _, err := tf.RepoHead(t.Context(), "box", "/repo"); !errors.Is(err, fleet.ErrNotSupported) {
		t.Errorf("RepoHead on a v1 agent: %v, want ErrNotSupported", err)
	}
}
