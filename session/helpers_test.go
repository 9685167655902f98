package session

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	fixtures     = "../testdata/sessions"
	baselineFile = "--work-api--/2026-05-01T09-00-00-000Z_0196a1b2-0000-7000-8000-000000000001.jsonl"
	cloneFile    = "--work-api--/2026-05-01T10-00-00-000Z_0196a1b2-0000-7000-8000-000000000002.jsonl"
	scratchFile  = "--work-web--/2026-05-02T08-00-00-000Z_0196a1b2-0000-7000-8000-000000000003.jsonl"
	legacyFile   = "--work-legacy--/legacy.jsonl"
	noIDFile     = "--work-legacy--/noid.jsonl"
	emptyFile    = "--work-new--/2026-05-03T00-00-00-000Z_0196a1b2-0000-7000-8000-000000000004.jsonl"
)

func agentFixture(rel string) string {
	return filepath.Join(fixtures, "agent", filepath.FromSlash(rel))
}
func brokenFixture(name string) string { return filepath.Join(fixtures, "broken", name) }

// copyAgentRoot copies testdata/sessions/agent into a temporary sessions
// root and gives every file a known modification time: 2026-05-01 plus the
// index in the order listed in mtimes (later is newer).
func copyAgentRoot(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join(fixtures, "agent")
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(root, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, rel := range []string{noIDFile, legacyFile, baselineFile, cloneFile, scratchFile, emptyFile} {
		setMtime(t, filepath.Join(root, filepath.FromSlash(rel)), fixtureTime(i))
	}
	return root
}

func fixtureTime(i int) time.Time {
	return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Hour)
}

func setMtime(t testing.TB, path string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path string, lines ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// header and entry build lines (with LF) for generated files.
func header(id string) string {
	return `{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-05-01T00:00:00.000Z","cwd":"/work/gen"}` + "\n"
}

func entry(id, parent string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return `{"type":"message","id":"` + id + `","parentId":` + p +
		`,"timestamp":"2026-05-01T00:00:01.000Z","message":{"role":"user","content":"m ` + id + `"}}` + "\n"
}

func ids(entries []Entry) []string {
	out := []string{}
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}
