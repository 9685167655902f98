//go:build unix

package fleet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// A bundle whose manifest pins its model is pinned from the spawn on, by
// the real agent with the scripted worker and with the real pi: the fleet
// sees modelPinned, set_model is refused (ErrModelPinned) before it reaches
// the worker, PinModel(false) lets it through to the worker, and
// PinModel(true) pins again.
func TestBundleModelPinEnforced(t *testing.T) {
	for _, kind := range []pitest.Kind{pitest.Scripted, pitest.RealPi} {
		t.Run(kind.String(), func(t *testing.T) {
			if kind == pitest.RealPi {
				pitest.Find(t)
			}
			reg := t.TempDir()
			publishFauxAs(t, reg, "pinned", `{"primary":{"provider":"faux","id":"faux-1"},"pin":true}`)
			addr, ps := startAgentOf(t, kind, reg)
			tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
			tf.waitAgent(t, "worker-01", transport.StateEstablished)
			inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "pinned"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = inst.Stop(context.Background()) })
			pinned := func() bool {
				for _, is := range tf.Status(t.Context()).Instances {
					if is.InstanceID == inst.ID() {
						return is.ModelPinned
					}
				}
				t.Fatalf("instance %s not in the status", inst.ID())
				return false
			}
			if !pinned() {
				t.Fatal("a worker of a pinned bundle is not pinned")
			}
			if err := inst.SetModel(t.Context(), "faux", "faux-1"); !errors.Is(err, fleet.ErrModelPinned) {
				t.Fatalf("SetModel while pinned = %v, want ErrModelPinned", err)
			}

			m, err := inst.PinModel(t.Context(), false)
			if err != nil || m == nil || m.Provider != "faux" || m.ID != "faux-1" {
				t.Fatalf("PinModel(false) = %+v, %v", m, err)
			}
			if pinned() {
				t.Error("still pinned after PinModel(false)")
			}
			if err := inst.SetModel(t.Context(), "faux", "faux-1"); err != nil {
				t.Fatalf("SetModel after unpin = %v (the worker's answer)", err)
			}
			if _, err := inst.PinModel(t.Context(), true); err != nil {
				t.Fatal(err)
			}
			if err := inst.SetModel(t.Context(), "faux", "faux-1"); !errors.Is(err, fleet.ErrModelPinned) {
				t.Fatalf("SetModel pinned again = %v, want ErrModelPinned", err)
			}
			if text, err := inst.Prompt(t.Context(), "say: still answering", fleet.PromptOptions{}); err != nil || text != "still answering" {
				t.Fatalf("Prompt = %q, %v", text, err)
			}
		})
	}
}

// With the real pi, a pinned model changed behind the fleet's back (an
// extension of the bundle switches it) is set back after the run and the
// drift is reported: a model_drift change, and the worker on its pinned
// model again.
func TestPinnedModelChangedByAnExtensionIsSetBack(t *testing.T) {
	pitest.Find(t)
	sw, err := os.ReadFile(filepath.Join("testdata", "switch-model.ts"))
	if err != nil {
		t.Fatal(err)
	}
	reg := t.TempDir()
	publishFauxAs(t, reg, "pinned", `{"primary":{"provider":"faux","id":"faux-1"},"pin":true}`,
		map[string]string{"ext/switch-model.ts": string(sw)})
	addr, ps := startAgentOf(t, pitest.RealPi, reg)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "pinned"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	drainChanges(tf.sub)
	if _, err := inst.Prompt(t.Context(), "/switch-model", fleet.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	tf.waitChange(t, "the drift", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeModelDrift && c.InstanceID == inst.ID() && c.Message == "faux/faux-1 → other/other-1"
	})
	st, err := inst.GetState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Model == nil || st.Model.Provider != "faux" || st.Model.ID != "faux-1" {
		t.Errorf("the worker's model after the drift: %+v", st.Model)
	}
}
