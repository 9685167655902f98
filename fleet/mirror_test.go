package fleet_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// TestAMirrorTheAgentsFileNoLongerContinuesIsFetchedAgain: the fleet's
// mirror of a worker's session file is what Transcript shows. A mirror
// damaged on disk (a line that is not an entry) is dropped and fetched
// again from the agent; a mirror whose last entry the agent's file no
// longer has (the file was replaced) is mirrored again from its start.
// Either way the transcript is the agent's file, nothing of the old
// mirror left.
func TestAMirrorTheAgentsFileNoLongerContinuesIsFetchedAgain(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	file := []string{
		`{"type":"message","id":"e1","parentId":null,"message":{"role":"user","content":"fix it"}}`,
		`{"type":"message","id":"e2","parentId":"e1","message":{"role":"assistant","content":"fixed"}}`,
		`{"type":"message","id":"e3","parentId":"e2","message":{"role":"user","content":"thanks"}}`,
	}
	ids := []string{"e1", "e2", "e3"}
	peer.mu.Lock()
	peer.sessionDir = "/sessions"
	peer.script = func(_ *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
		se, ok := fr.(*transport.SessionEntriesFrame)
		if !ok {
			return false
		}
		from := 0
		if se.After != "" {
			i := slices.Index(ids, se.After)
			if i < 0 {
				reply(&transport.SessionEntriesResultFrame{After: se.After, Entries: []byte("[]"),
					Error: &transport.FsError{Code: "unknown_entry", Message: "no entry " + se.After}})
				return true
			}
			from = i + 1
		}
		entries := "[" + strings.Join(file[from:], ",") + "]"
		reply(&transport.SessionEntriesResultFrame{After: se.After, Entries: []byte(entries)})
		return true
	}
	peer.mu.Unlock()
	tf := newTestFleet(t, peer)
	olds := map[string]string{
		"damaged":  `{"type":"message","id":"old1"}` + "\nnot an entry\n",
		"replaced": `{"type":"message","id":"old1","parentId":null,"message":{"role":"user","content":"before"}}` + "\n",
	}
	insts := map[string]*fleet.Instance{}
	var sessions []transport.SessionInfo
	for name := range olds {
		inst := spawn(t, tf, "box")
		if inst.SessionPath() == "" {
			t.Fatal("the worker has no session file")
		}
		insts[name] = inst
		mirror := tf.MirrorPath("box", inst.SessionPath())
		if err := os.MkdirAll(filepath.Dir(mirror), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(mirror, []byte(olds[name]), 0o600); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, transport.SessionInfo{SessionID: "s-" + name, Path: inst.SessionPath(), Cwd: "/work/repo", Kind: "task", UpdatedAt: 1})
	}
	// The full report makes the projection synced; the catch-ups it
	// starts and Transcript's own meet the old mirrors.
	report(t, tf, peer, sessions...)

	for name := range olds {
		t.Run(name, func(t *testing.T) {
			inst := insts[name]
			path := inst.SessionPath()
			mirror := tf.MirrorPath("box", path)
			entries, more, err := inst.Transcript(t.Context(), 10)
			if err != nil {
				t.Fatalf("Transcript = %v", err)
			}
			var got []string
			for _, e := range entries {
				var h struct{ ID string }
				if err := json.Unmarshal(e, &h); err != nil {
					t.Fatal(err)
				}
				got = append(got, h.ID)
			}
			if !slices.Equal(got, ids) || more {
				t.Errorf("transcript %v (more %v), want the agent's file %v", got, more, ids)
			}
			raw, err := os.ReadFile(mirror)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(file, "\n") + "\n"; string(raw) != want {
				t.Errorf("mirror file:\n%s\nwant:\n%s", raw, want)
			}
		})
	}
}
