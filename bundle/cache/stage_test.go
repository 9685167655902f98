package cache

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	slices.Sort(out)
	return out
}

func TestCleanStagingKeepsLiveStagesAndRemovesAbandonedOnes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no file locks")
	}
	c, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	live, err := c.newStage()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(live.dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	// An abandoned stage: its lock file exists but nobody holds it.
	dead := filepath.Join(c.root, ".sync-dead")
	for _, p := range []string{dead + ".lock", dead + ".pointer"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dead, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A TypeScript-style staging directory (no lock file), fresh and old.
	fresh := filepath.Join(c.root, ".sync-tsfresh")
	old := filepath.Join(c.root, ".sync-tsold")
	for _, d := range []string{fresh, old} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * unlockedStaleAfter)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}

	n, err := c.CleanStaging()
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("removed %d stages, want 2 (the abandoned one and the old unlocked one)", n)
	}
	want := []string{live.id, live.id + ".lock", ".sync-tsfresh", "by-name"}
	slices.Sort(want)
	if got := names(t, c.root); !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
	if err := live.release(); err != nil {
		t.Fatal(err)
	}
	if got := names(t, c.root); !slices.Equal(got, []string{".sync-tsfresh", "by-name"}) {
		t.Errorf("after release: %v", got)
	}
}
