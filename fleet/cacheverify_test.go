//go:build unix

package fleet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// VerifyCaches reports the bundles of a real agent's cache, intact and
// then with a file gone; agents that do not announce cache-verify are
// refused before any frame is sent.
func TestVerifyCaches(t *testing.T) {
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	cacheDir := t.TempDir()
	bc, err := cache.Open(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := bc.Sync(context.Background(), registry.NewDir(reg), "plain", cache.SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) { c.CacheDir = cacheDir })
	ts := newTestAgentPeer(t, "ts-agent", false)
	old := newTestAgentPeer(t, "old-pifleet", true)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{
		{Name: "worker-01", Addresses: []string{addr}},
		{Name: "ts-agent", Addresses: []string{ts.Addr()}},
		{Name: "old-pifleet", Addresses: []string{old.Addr()}},
	})
	for _, name := range []string{"worker-01", "ts-agent", "old-pifleet"} {
		tf.waitAgent(t, name, transport.StateEstablished)
	}
	ctx := t.Context()

	for _, name := range []string{"ts-agent", "old-pifleet"} {
		if _, err := tf.VerifyCaches(ctx, name); !errors.Is(err, fleet.ErrNotSupported) {
			t.Errorf("VerifyCaches(%s): %v, want ErrNotSupported", name, err)
		}
	}
	if _, err := tf.VerifyCaches(ctx, "nobody"); !errors.Is(err, fleet.ErrUnknownAgent) {
		t.Errorf("VerifyCaches of an unknown agent: %v", err)
	}

	got, err := tf.VerifyCaches(ctx, "worker-01")
	if err != nil {
		t.Fatal(err)
	}
	hash := res.Manifest.BundleHash
	if d := cmp.Diff([]fleet.CacheCheck{{Bundle: "plain", BundleHash: hash, OK: true}}, got); d != "" {
		t.Fatalf("intact cache (-want +got):\n%s", d)
	}

	if err := os.Remove(filepath.Join(bc.Dir(hash), "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	got, err = tf.VerifyCaches(ctx, "worker-01")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].OK || got[0].Code != agent.CodeCorrupt || got[0].BundleHash != hash ||
		!cmp.Equal(got[0].Problems, []fleet.CacheProblem{{Path: "AGENTS.md", Reason: "missing"}}) {
		t.Errorf("corrupt cache: %+v", got)
	}
}
