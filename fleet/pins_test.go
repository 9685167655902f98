package fleet_test

import (
	"errors"
	"testing"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// A spawn pinned to a bundleHash the registry does not serve is refused
// by the fleet before any frame: the test peer, like the TypeScript
// agent, would start whatever it was asked to. The next spawn, pinned to
// the served version, is the first the agent sees, with its pin.
func TestSpawnPinnedToAnotherHashIsRefusedBeforeAnyFrame(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	man, err := registry.Show(tf.regRoot, "default")
	if err != nil {
		t.Fatal(err)
	}
	wrong := "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	_, err = tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "default", PinnedHash: wrong})
	var he *bundle.HashPinError
	if !errors.As(err, &he) || !errors.Is(err, bundle.CodeHashMismatch) || he.Pinned != wrong || he.Served != man.BundleHash {
		t.Fatalf("Spawn pinned to another hash: %v", err)
	}
	if st := tf.Status(t.Context()); len(st.Instances) != 0 {
		t.Errorf("a refused spawn left instances: %+v", st.Instances)
	}
	if _, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "default", PinnedHash: man.BundleHash}); err != nil {
		t.Fatal(err)
	}
	if sp := nextFrame[*transport.SpawnFrame](t, peer); sp.BundleHash != man.BundleHash {
		t.Errorf("the first spawn frame the agent got: %+v", sp)
	}
}

// A model_drift from the agent reaches the application as a change; an
// unrefused drift (the model was not pinned) becomes the instance's model,
// a refused one (set back) does not.
func TestModelDriftIsReported(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	model := func() string {
		for _, is := range tf.Status(t.Context()).Instances {
			if is.InstanceID == inst.ID() && is.Model != nil {
				return is.Model.Provider + "/" + is.Model.ID
			}
		}
		return ""
	}
	before := model()
	for _, refused := range []bool{true, false} {
		peer.send(peer.conn(), &transport.ModelDriftFrame{InstanceID: inst.ID(), Refused: refused,
			Expected: transport.ModelRef{Provider: "faux", ID: "faux-1"}, Actual: transport.ModelRef{Provider: "other", ID: "m2"}})
		tf.waitChange(t, "the drift", func(c fleet.Change) bool {
			return c.Kind == fleet.ChangeModelDrift && c.InstanceID == inst.ID() && c.Message == "faux/faux-1 → other/m2"
		})
		if got, want := model(), map[bool]string{true: before, false: "other/m2"}[refused]; got != want {
			t.Errorf("refused %v: model %q, want %q", refused, got, want)
		}
	}
}
