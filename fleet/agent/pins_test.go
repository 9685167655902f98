//go:build unix

package agent

import (
	"testing"

	"example.com/pifleet/transport"
)

// A bundle whose manifest says model.pin is pinned from its spawn on:
// set_model and cycle_model are refused with model_pinned, the listing
// says so, a re-adopted worker stays pinned, and model_pin false lifts it.
func TestBundleModelPinAppliedAtSpawn(t *testing.T) {
	h1 := newHarness(t, hopts{})
	c := h1.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h1.cwd, "pinned", nil)
	if !inst.ModelPinned || inst.Model == nil || inst.Model.ID != "faux-1" {
		t.Fatalf("spawned %+v", inst)
	}
	refused := func(c *client, typ string) {
		t.Helper()
		c.rpc(inst.InstanceID, "", map[string]any{"type": typ, "id": "cmd-" + typ, "provider": "faux", "modelId": "faux-1"})
		if e := nextOf[*transport.ErrorFrame](c, nil); e.Code != CodeModelPinned {
			t.Fatalf("%s while pinned: %+v", typ, e)
		}
	}
	refused(c, "set_model")
	refused(c, "cycle_model")

	h1.a.Close()
	h2 := newHarness(t, hopts{stateDir: h1.cfg.StateDir, agentDir: h1.agentDir, cwd: h1.cwd, registry: h1.registry})
	d := h2.dial(t)
	d.hello()
	if l := d.roundTrip("l"); len(l.Instances) != 1 || !l.Instances[0].ModelPinned {
		t.Fatalf("re-adopted: %+v", l.Instances)
	}
	refused(d, "set_model")

	unpin := &transport.ModelPinFrame{InstanceID: inst.InstanceID, Pin: false}
	unpin.ID = "unpin"
	d.send(unpin)
	if p, ok := d.reply("unpin").(*transport.ModelPinnedFrame); !ok || p.Pin {
		t.Fatalf("model_pinned %+v", p)
	}
	d.rpc(inst.InstanceID, "", map[string]any{"type": "set_model", "id": "sm", "provider": "faux", "modelId": "faux-1"})
	if _, ev := d.nextEvent(inst.InstanceID, func(e event) bool { return e.Type == "response" && e.ID == "sm" }); !ev.Success {
		t.Fatalf("set_model after unpin: %+v", ev)
	}
	if l := d.roundTrip("l2"); l.Instances[0].ModelPinned {
		t.Fatalf("still pinned: %+v", l.Instances)
	}
}

// A rebundle to a bundle that pins its model pins the worker.
func TestRebundleToAPinningBundlePins(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	if inst.ModelPinned {
		t.Fatalf("a worker of an unpinned bundle is pinned: %+v", inst)
	}
	f := &transport.RebundleFrame{InstanceID: inst.InstanceID, Bundle: "pinned"}
	f.ID = "rb"
	c.send(f)
	if r := c.reply("rb").(*transport.RebundledFrame); !r.Switched || r.Error != nil {
		t.Fatalf("rebundled %+v", r)
	}
	if l := c.roundTrip("l"); !l.Instances[0].ModelPinned {
		t.Fatalf("after the rebundle: %+v", l.Instances[0])
	}
	c.rpc(inst.InstanceID, "", map[string]any{"type": "set_model", "id": "sm", "provider": "faux", "modelId": "faux-1"})
	if e := nextOf[*transport.ErrorFrame](c, nil); e.Code != CodeModelPinned {
		t.Fatalf("set_model after the rebundle: %+v", e)
	}
}
