//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/internal/faketailscale"
	"example.com/pifleet/transport/identity"
)

// Issue #20: the registry's gate asks who a peer is once, not once per
// request. With the tailscale CLI (a fake that counts its runs), a cold
// sync of a 2,000-file bundle runs at most 2 whois lookups; it ran 2,000.
func TestRegistryGateLooksAPeerUpOnce(t *testing.T) {
	const files = 2000
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	src := t.TempDir()
	for i := range files {
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.md", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "file %d\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := registry.Publish(reg, "big", src, registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	fake := faketailscale.Install(t, map[string]identity.Identity{"127.0.0.1": {Machine: "box", User: "ana@example"}})
	s, _ := startServe(t, &ServeCmd{
		StateDir:  filepath.Join(dir, "state"),
		Registry:  reg,
		Listen:    "127.0.0.1:0",
		Tailscale: fake.Bin,
	})
	before := fake.Count(t, "whois")
	client, err := registry.NewHTTP(s.Registry)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	c, err := cache.Open(t.TempDir(), cache.WithDurability(false))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Sync(t.Context(), client, "big", cache.SyncOptions{})
	if err != nil {
		t.Fatalf("cold sync through the gate: %v", err)
	}
	if len(res.Fetched) != files {
		t.Fatalf("fetched %d files, want %d", len(res.Fetched), files)
	}
	if n := fake.Count(t, "whois") - before; n < 1 || n > 2 {
		t.Errorf("a cold sync of %d files ran %d whois lookups, want 1 or 2 (calls: %q)", files, n, fake.Calls(t))
	}
}
