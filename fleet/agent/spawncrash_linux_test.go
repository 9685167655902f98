//go:build linux

package agent

import (
	"testing"

	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/transport"
)

// Issue #16, defect 1: an agent killed (kill -9) during a spawn left a pi
// worker running forever. The spawn recorded the instance, started the
// worker and only then stored what re-adoption needs; the restarted agent
// reported the instance lost and never stopped its live shim. Now all that
// licenses a start is stored before it, and a restart rolls back a spawn
// that did not complete: whatever point the agent died at, the restarted
// agent owns every worker process there is, and the unanswered spawn left
// none. The process tree is checked (orphans are reparented to this test),
// never process names.
func TestKill9DuringSpawnLeavesNoWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agent processes")
	}
	e2ekit.BecomeSubreaper(t)
	for _, point := range []string{"before-start", "started", "before-complete"} {
		t.Run(point, func(t *testing.T) {
			w := newWorld(t)
			p := w.startWith(t, EnvSpawnHold+"="+point)
			c := dialAddr(t, p.addr, "")
			c.hello()
			sp := &transport.SpawnFrame{Cwd: w.cwd, Bundle: "default"}
			sp.ID = "s"
			c.send(sp)
			select {
			case <-p.held:
			case <-p.done:
				t.Fatal("the agent exited before the spawn reached " + point)
			}
			p.kill9(t)

			p = w.start(t) // listening: re-adoption is done
			d := dialAddr(t, p.addr, "")
			d.hello()
			for _, in := range d.roundTrip("l").Instances {
				if in.State == transport.InstanceRunning {
					t.Errorf("the interrupted spawn's worker runs on as %s (nobody was told of it)", in.InstanceID)
				}
			}
			reapOrphans(t, p.cmd.Process.Pid)
			p.kill9(t)
			reapOrphans(t)
		})
	}
}

// A worker that a restarted agent cannot re-adopt (here its stored spec
// is gone) is reported lost, as before, and its worker is stopped too:
// reported lost, it must not run on unseen.
func TestUnadoptableWorkerIsStopped(t *testing.T) {
	h1 := newHarness(t, hopts{})
	c := h1.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h1.cwd, "default", nil)
	if inst.PID == nil {
		t.Fatal("spawned without a pid")
	}
	pid := int(*inst.PID)
	if err := h1.a.store.DeleteKV(specKeyPrefix + inst.InstanceID); err != nil {
		t.Fatal(err)
	}
	h1.a.Close() // the worker keeps running under its shim

	h2 := newHarness(t, hopts{stateDir: h1.cfg.StateDir, agentDir: h1.agentDir, cwd: h1.cwd, registry: h1.registry})
	d := h2.dial(t)
	d.hello()
	l := d.roundTrip("l").Instances
	if len(l) != 1 || l[0].InstanceID != inst.InstanceID || l[0].State != transport.InstanceLost {
		t.Fatalf("after the restart: %+v", l)
	}
	for _, p := range e2ekit.Descendants(1) { // wherever it went
		if p.PID == pid && p.State != 'Z' {
			t.Errorf("the lost instance's worker %v still runs", p)
		}
	}
}
