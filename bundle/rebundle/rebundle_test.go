package rebundle_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/rebundle"
	"example.com/pifleet/bundle/registry"
)

// fixture publishes bundles A and B in a registry directory and syncs A.
func fixture(t *testing.T) (rebundle.Bundle, rebundle.SyncFunc, *bundle.Manifest) {
	t.Helper()
	regRoot := t.TempDir()
	publish := func(name string, files map[string]string) *bundle.Manifest {
		src := t.TempDir()
		for p, c := range files {
			full := filepath.Join(src, filepath.FromSlash(p))
			os.MkdirAll(filepath.Dir(full), 0o755)
			if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m, err := registry.Publish(regRoot, name, src, registry.PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := publish("a", map[string]string{"skills/a/SKILL.md": "# a\n", "bundle.json": `{"skills":["skills"]}`})
	b := publish("b", map[string]string{"skills/b/SKILL.md": "# b\n", "bundle.json": `{"skills":["skills"],"tools":{"active":["read"]}}`})
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.NewDir(regRoot)
	sync := func(ctx context.Context, name string) (*cache.Result, error) {
		return c.Sync(ctx, reg, name, cache.SyncOptions{})
	}
	if _, err := sync(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	return rebundle.Bundle{Name: "a", Hash: a.BundleHash}, sync, b
}

func TestSwitchSyncsThenRestarts(t *testing.T) {
	from, sync, b := fixture(t)
	var restartedWith *cache.Result
	var states []rebundle.State
	out, err := rebundle.Switch(context.Background(), from, "b", sync,
		func(ctx context.Context, to *cache.Result) error { restartedWith = to; return nil },
		rebundle.Options{OnState: func(s rebundle.State) { states = append(states, s) }})
	if err != nil {
		t.Fatal(err)
	}
	want := []rebundle.State{"running_old", "syncing", "reloading", "running_new"}
	if d := cmp.Diff(want, out.Trail); d != "" {
		t.Errorf("trail (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, states); d != "" {
		t.Errorf("OnState (-want +got):\n%s", d)
	}
	if !out.Switched || out.Running != (rebundle.Bundle{Name: "b", Hash: b.BundleHash}) {
		t.Errorf("outcome = %+v", out)
	}
	if restartedWith == nil || restartedWith.BundleHash != b.BundleHash || len(restartedWith.Resources.Skills) != 1 ||
		!slicesEqual(restartedWith.Resources.Tools, []string{"read"}) {
		t.Errorf("restarted with %+v, want bundle b's resources", restartedWith)
	}
}

func slicesEqual(a, b []string) bool { return cmp.Equal(a, b) }

func TestSwitchKeepsTheBundleWhenTheSyncFails(t *testing.T) {
	from, sync, _ := fixture(t)
	restarted := false
	out, err := rebundle.Switch(context.Background(), from, "missing", sync,
		func(context.Context, *cache.Result) error { restarted = true; return nil }, rebundle.Options{})
	var re *rebundle.Error
	if !errors.As(err, &re) || re.Step != rebundle.StateSyncing || !errors.Is(err, bundle.CodeNotFound) {
		t.Fatalf("Switch = %v, want a sync error (not_found)", err)
	}
	if restarted {
		t.Error("the worker was restarted although the sync failed")
	}
	if d := cmp.Diff([]rebundle.State{"running_old", "syncing", "unchanged", "running_old"}, out.Trail); d != "" {
		t.Errorf("trail (-want +got):\n%s", d)
	}
	if out.Switched || out.Running != from {
		t.Errorf("outcome = %+v, want still on %v", out, from)
	}
}

func TestSwitchKeepsTheBundleWhenTheRestartFails(t *testing.T) {
	from, sync, b := fixture(t)
	boom := errors.New("pi did not come back")
	out, err := rebundle.Switch(context.Background(), from, "b", sync,
		func(context.Context, *cache.Result) error { return boom }, rebundle.Options{})
	var re *rebundle.Error
	if !errors.As(err, &re) || re.Step != rebundle.StateReloading || !errors.Is(err, boom) {
		t.Fatalf("Switch = %v, want the restart error", err)
	}
	if d := cmp.Diff([]rebundle.State{"running_old", "syncing", "reloading", "unchanged", "running_old"}, out.Trail); d != "" {
		t.Errorf("trail (-want +got):\n%s", d)
	}
	if out.Running != from || out.Sync == nil || out.Sync.BundleHash != b.BundleHash {
		t.Errorf("outcome = %+v", out)
	}
}
