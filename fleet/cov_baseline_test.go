package fleet_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// TestCreateBaselineRefusesBadOptionsAndStopsItsWorkerOnFailure: options
// that cannot make a baseline are a *ConfigError before any worker is
// spawned; a baseline that fails after its spawn (pi refuses to compact,
// or names no session file) stops its worker and says which step failed.
func TestCreateBaselineRefusesBadOptionsAndStopsItsWorkerOnFailure(t *testing.T) {
	peer := filesPeer(t, true)
	files := peer.script
	peer.mu.Lock()
	peer.script = func(c *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
		if rpc, ok := fr.(*transport.RPCFrame); ok {
			var cmd struct{ ID, Type string }
			_ = json.Unmarshal(rpc.Command, &cmd)
			if cmd.Type == "compact" && strings.Contains(rpc.InstanceID, "-1") { // the first worker's compaction fails
				peer.event(c, rpc.InstanceID, fmt.Sprintf(`{"type":"response","id":%q,"command":"compact","success":false,"error":"model overloaded"}`, cmd.ID))
				return true
			}
		}
		return files(c, fr, reply)
	}
	peer.mu.Unlock()
	tf := newTestFleet(t, peer)
	ctx := t.Context()
	spawnAt := fleet.SpawnOptions{Agent: "box", Cwd: "/repo", Bundle: "default"}

	for name, opts := range map[string]fleet.BaselineOptions{
		"no agent":     {Spawn: fleet.SpawnOptions{Cwd: "/repo", Bundle: "default"}},
		"no cwd":       {Spawn: fleet.SpawnOptions{Agent: "box", Bundle: "default"}},
		"from session": {Spawn: fleet.SpawnOptions{Agent: "box", Cwd: "/repo", Bundle: "default", FromSession: "/s/x.jsonl"}},
	} {
		if _, err := tf.CreateBaseline(ctx, opts); !errors.Is(err, fleet.ErrInvalidConfig) {
			t.Errorf("%s: CreateBaseline = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := tf.CreateBaseline(ctx, fleet.BaselineOptions{Repo: "a\x00b", Spawn: spawnAt}); err == nil {
		t.Error("a repository name with a control character was accepted")
	}
	if _, err := tf.CreateBaseline(ctx, fleet.BaselineOptions{Spawn: fleet.SpawnOptions{Agent: "nowhere", Cwd: "/repo", Bundle: "default"}}); !errors.Is(err, fleet.ErrUnknownAgent) {
		t.Errorf("unknown agent: %v", err)
	}
	if st := tf.Status(ctx); len(st.Instances) != 0 {
		t.Fatalf("a refused baseline spawned: %+v", st.Instances)
	}

	_, err := tf.CreateBaseline(ctx, fleet.BaselineOptions{Spawn: spawnAt})
	if err == nil || !strings.Contains(err.Error(), "compact") || !strings.Contains(err.Error(), "model overloaded") {
		t.Errorf("failed compaction: %v", err)
	}
	_, err = tf.CreateBaseline(ctx, fleet.BaselineOptions{Spawn: spawnAt})
	if err == nil || !strings.Contains(err.Error(), "session file") {
		t.Errorf("no session file: %v", err)
	}
	var spawned, stopped int
	for _, fr := range drainFrames(peer) {
		switch fr.(type) {
		case *transport.SpawnFrame:
			spawned++
		case *transport.StopFrame:
			stopped++
		}
	}
	if spawned != 2 || stopped != 2 {
		t.Errorf("%d workers spawned, %d stopped; want both failed baselines' workers stopped", spawned, stopped)
	}
	for _, in := range tf.Status(ctx).Instances {
		tf.waitInstance(t, in.InstanceID, fleet.StateStopped)
	}
}

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
