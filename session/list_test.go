package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestListFixtures(t *testing.T) {
	root := copyAgentRoot(t)
	l, err := NewLister(root).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := func(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }
	want := []SessionInfo{
		{SessionID: "0196a1b2-0000-7000-8000-000000000003", Path: p(scratchFile), Name: "Second idea", Cwd: "/work/web",
			Kind: KindScratch, UpdatedAt: MillisOf(fixtureTime(4))},
		{SessionID: "0196a1b2-0000-7000-8000-000000000002", Path: p(cloneFile), Name: "task:t42:fix-tests", Cwd: "/work/api",
			Kind: KindTask, UpdatedAt: MillisOf(fixtureTime(3)),
			ParentSession: "/home/dev/.pi/agent/sessions/--work-api--/2026-05-01T09-00-00-000Z_0196a1b2-0000-7000-8000-000000000001.jsonl"},
		{SessionID: "0196a1b2-0000-7000-8000-000000000001", Path: p(baselineFile), Name: "baseline:api", Cwd: "/work/api",
			Kind: KindBaseline, Pinned: true, UpdatedAt: MillisOf(fixtureTime(2))},
		{SessionID: "legacy-1", Path: p(legacyFile), Name: "baseline:legacy", Cwd: "/work/legacy",
			Kind: KindBaseline, Pinned: true, UpdatedAt: MillisOf(fixtureTime(1))},
		{SessionID: "noid", Path: p(noIDFile), Cwd: UnknownCwd, Kind: KindScratch, UpdatedAt: MillisOf(fixtureTime(0))},
	}
	if d := cmp.Diff(want, l.Sessions); d != "" {
		t.Errorf("sessions (-want +got):\n%s", d)
	}
	if len(l.Skipped) != 1 || l.Skipped[0].Path != p(emptyFile) || !errors.Is(l.Skipped[0].Err, ErrNoHeader) {
		t.Errorf("skipped = %v; want the empty file, for lack of a header", l.Skipped)
	}
}

func TestListMissingRootIsEmpty(t *testing.T) {
	l, err := NewLister(filepath.Join(t.TempDir(), "no", "sessions")).List(context.Background())
	if err != nil || l.Sessions == nil || len(l.Sessions) != 0 {
		t.Fatalf("missing root: %+v, %v", l, err)
	}
}

func TestListCacheAndIncrementalRead(t *testing.T) {
	root := copyAgentRoot(t)
	path := filepath.Join(root, filepath.FromSlash(scratchFile))
	lister := NewLister(root)
	ctx := context.Background()
	name := func() string {
		t.Helper()
		l, err := lister.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range l.Sessions {
			if s.Path == path {
				return s.Name
			}
		}
		t.Fatalf("%s not listed", path)
		return ""
	}
	if got := name(); got != "Second idea" {
		t.Fatalf("name %q", got)
	}

	// Same size, same mtime, other content: the cache answers (the file is
	// not read again), which is what makes re-listing cheap.
	raw, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	edited := []byte(string(raw[:len(raw)-len("Second idea  \"}\n")-2]) + "  Secund idea  \"}\n")
	if len(edited) != len(raw) {
		t.Fatalf("test edit changed the size: %d vs %d", len(edited), len(raw))
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	setMtime(t, path, st.ModTime())
	if got := name(); got != "Second idea" {
		t.Errorf("unchanged stat: name %q, want the cached one", got)
	}

	// pi appends a rename: only the new part is read; the name follows.
	appendFile(t, path, `{"type":"session_info","id":"c0000008","parentId":"c0000007","timestamp":"2026-05-02T08:00:06.000Z","name":"task:t7:third"}`+"\n")
	if got := name(); got != "task:t7:third" {
		t.Errorf("after append: name %q", got)
	}
	// An append that does not rename keeps the name found before.
	appendFile(t, path, `{"type":"custom","id":"c0000009","parentId":"c0000008","timestamp":"2026-05-02T08:00:07.000Z","customType":"x","data":{}}`+"\n")
	if got := name(); got != "task:t7:third" {
		t.Errorf("after a non-rename append: name %q", got)
	}

	// A rewrite with another header is read from the start.
	writeFile(t, path, `{"type":"session","version":3,"id":"new-id","timestamp":"t","cwd":"/w"}`+"\n")
	if got := name(); got != "" {
		t.Errorf("after rewrite: name %q", got)
	}

	// A removed file leaves the listing and the cache.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	l, _ := lister.List(ctx)
	for _, s := range l.Sessions {
		if s.Path == path {
			t.Error("removed file still listed")
		}
	}
	if _, ok := lister.cache[path]; ok {
		t.Error("removed file still cached")
	}
}

func TestListReadsOnFromWhereItStopped(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "s.jsonl")
	writeFile(t, path, header("sid"), `{"type":"session_info","id":"00000001","parentId":null,"timestamp":"t","name":"one"}`+"\n")
	lister := NewLister(root)
	if _, err := lister.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Corrupt the already-read session_info in place, then append: a
	// reader that started over would lose the name, one that reads on
	// keeps it.
	raw, _ := os.ReadFile(path)
	copy(raw[len(header("sid")):], "XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, entry("00000002", "00000001"))
	l, err := lister.List(context.Background())
	if err != nil || len(l.Sessions) != 1 || l.Sessions[0].Name != "one" {
		t.Fatalf("listing after append: %+v, %v", l.Sessions, err)
	}
}

func TestListGivesDuplicateIDsUniqueStableIDs(t *testing.T) {
	root := t.TempDir()
	own := filepath.Join(root, "--a--", "2026-05-01T00-00-00-000Z_dup.jsonl")
	copyA := filepath.Join(root, "--a--", "copy.jsonl")
	copyB := filepath.Join(root, "--b--", "another.jsonl")
	for _, p := range []string{copyB, own, copyA} {
		writeFile(t, p, header("dup"))
	}
	for range 2 {
		l, err := NewLister(root).List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range l.Sessions {
			got[s.Path] = s.SessionID
		}
		want := map[string]string{own: "dup", copyA: "dup@--a--/copy", copyB: "dup@--b--/another"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("ids (-want +got):\n%s", d)
		}
	}
}

func TestDefaultRoot(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct {
		sessionDir, agentDir, want string
	}{
		{"", "", filepath.Join(home, ".pi", "agent", "sessions")},
		{"", "/opt/pi", "/opt/pi/sessions"},
		{"", "~/pi", filepath.Join(home, "pi", "sessions")},
		{"/srv/sessions", "/opt/pi", "/srv/sessions"},
	}
	for _, tc := range tests {
		t.Setenv("PI_CODING_AGENT_SESSION_DIR", tc.sessionDir)
		t.Setenv("PI_CODING_AGENT_DIR", tc.agentDir)
		got, err := DefaultRoot()
		if err != nil || got != tc.want {
			t.Errorf("session dir %q, agent dir %q: %q, %v; want %q", tc.sessionDir, tc.agentDir, got, err, tc.want)
		}
	}
}

func TestListCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewLister(copyAgentRoot(t)).List(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled list: %v", err)
	}
}
