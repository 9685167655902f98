//go:build linux

package agent

import (
	"testing"

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
	adoptOrphans(t)
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
