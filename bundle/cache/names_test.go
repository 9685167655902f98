package cache_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle/cache"
)

// Names lists the bundles synced, in name order, and nothing that only
// looks like a pointer.
func TestNames(t *testing.T) {
	c := openCache(t)
	if names, err := c.Names(); err != nil || len(names) != 0 {
		t.Fatalf("empty cache: %v %v", names, err)
	}
	reg := newRegistry(t)
	for _, name := range []string{"review", "a", "a.b"} {
		reg.publish(name, map[string]string{"f.txt": name})
		if _, err := c.Sync(context.Background(), reg.client(), name, quick); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(c.Root(), cache.PointerDir)
	for _, stray := range []string{"notes.txt", "bad name.json", ".hidden.json"} {
		if err := os.WriteFile(filepath.Join(dir, stray), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := c.Names()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a", "a.b", "review"}, names); d != "" {
		t.Errorf("names (-want +got):\n%s", d)
	}
	for _, n := range names {
		if err := c.VerifyBundle(n); err != nil {
			t.Errorf("VerifyBundle(%s): %v", n, err)
		}
	}

	// A cache whose pointer directory is gone holds no bundle.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if names, err := c.Names(); err != nil || len(names) != 0 {
		t.Errorf("without %s: %v %v", cache.PointerDir, names, err)
	}
}
