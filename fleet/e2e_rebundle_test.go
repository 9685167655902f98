//go:build unix

package fleet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// A rebundle to a bundle whose extension throws at load fails, and bundle
// A's worker goes on answering through the SDK, on the same session
// (issue 12): its events reach the fleet again (they keep increasing
// seqs), so get_state and the next prompt are answered, with the text pi
// gave.
func TestFailedRebundleKeepsTheWorkerAnswering(t *testing.T) {
	pitest.Find(t)
	reg := t.TempDir()
	publishFaux(t, reg)
	ext, err := os.ReadFile(pitest.FauxProvider(t))
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for name, content := range map[string]string{
		"ext/faux-provider.ts": string(ext),
		"ext/throws.ts":        "throw new Error(\"this extension always throws at load\");\nexport default function () {}\n",
		"bundle.json":          `{"extensions":["ext/faux-provider.ts","ext/throws.ts"],"model":{"primary":{"provider":"faux","id":"faux-1"}}}`,
	} {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := registry.Publish(reg, "broken", src, registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	addr, ps := startAgentOf(t, pitest.RealPi, reg)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "faux"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop(context.Background()) }) // t.Context is done in cleanups
	if text, err := inst.Prompt(t.Context(), "say: before", fleet.PromptOptions{}); err != nil || text != "before" {
		t.Fatalf("Prompt = %q, %v", text, err)
	}
	before, err := inst.GetState(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	err = inst.Rebundle(t.Context(), "broken")
	var re *fleet.RebundleError
	if !errors.As(err, &re) || re.Bundle != "faux" || re.Code != "restart_failed" {
		t.Fatalf("Rebundle to a throwing extension = %v, want a RebundleError still on faux", err)
	}
	after, err := inst.GetState(t.Context())
	if err != nil {
		t.Fatalf("get_state after the failed rebundle: %v", err)
	}
	if after.SessionFile != before.SessionFile {
		t.Errorf("session %s after the failed rebundle, %s before", after.SessionFile, before.SessionFile)
	}
	for _, say := range []string{"after", "and again"} {
		if text, err := inst.Prompt(t.Context(), "say: "+say, fleet.PromptOptions{}); err != nil || text != say {
			t.Fatalf("Prompt after the failed rebundle = %q, %v; want %q", text, err, say)
		}
	}
}
