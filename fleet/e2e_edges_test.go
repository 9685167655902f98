//go:build linux

package fleet_test

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// Every live state of an instance can end with its worker (InstanceTable's
// workerGone edges), and a stop is accepted from every state where one
// makes sense. Each case below brings an instance of the real agent,
// running the scripted worker, into one state and ends it there: the
// worker process is killed (kill -9 of the pid found through the process
// tree), or the application stops it.
func TestEveryLiveStateEndsWithItsWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	publish(t, reg, "strict", `{"review":{"maxRejects":0}}`)
	tf, ps, stateDir := fleetWithAgent(t, pitest.Scripted, reg, func(c *agent.Config) {
		// A worker whose environment says so does not hear its stdin
		// close, as a hung pi would not: only the kill after the grace
		// period ends it.
		c.PiCommand = append([]string{"/bin/sh", "-c",
			`if [ -n "$PIFLEET_TEST_DEAF" ]; then { cat; exec sleep 600; } | "$0" "$@"; exit; fi; exec "$0" "$@"`}, c.PiCommand...)
	})

	spawnWith := func(t *testing.T, bundle string, env map[string]string) *fleet.Instance {
		t.Helper()
		inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: bundle, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	spawn := func(t *testing.T, bundle string) *fleet.Instance {
		t.Helper()
		inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: bundle})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	// transition waits for inst's transition ev out of from.
	transition := func(t *testing.T, inst *fleet.Instance, ev fleet.InstanceEvent, from fleet.InstanceState) {
		t.Helper()
		tf.waitChange(t, string(ev)+" from "+string(from), func(c fleet.Change) bool {
			return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.Event == string(ev) && c.From == string(from)
		})
	}
	kill := func(t *testing.T, inst *fleet.Instance) {
		t.Helper()
		_, workerPID, err := e2ekit.WorkerProcesses(stateDir, inst.ID())
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(workerPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	mustState := func(t *testing.T, inst *fleet.Instance, want fleet.InstanceState) {
		t.Helper()
		if st := inst.State(); st != want {
			t.Fatalf("state %s, want %s", st, want)
		}
	}
	// done submits a task that finishes at once and waits for its review.
	done := func(t *testing.T, inst *fleet.Instance) *fleet.Task {
		t.Helper()
		task, err := inst.Submit(t.Context(), "say: done", fleet.PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r := tf.report(t); r.TaskID != task.ID() {
			t.Fatalf("report %+v, want task %s", r, task.ID())
		}
		mustState(t, inst, fleet.StateAwaitingReview)
		return task
	}
	review := func(t *testing.T, task *fleet.Task) {
		t.Helper()
		if err := task.StartReview(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	escalate := func(t *testing.T, task *fleet.Task) {
		t.Helper()
		if esc, err := task.Reject(t.Context(), "no"); err != nil || !esc {
			t.Fatalf("Reject = %v, %v; want escalated (maxRejects 0)", esc, err)
		}
	}
	stop := func(t *testing.T, inst *fleet.Instance) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		if err := inst.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		mustState(t, inst, fleet.StateStopped)
	}

	t.Run("killed while idle", func(t *testing.T) {
		inst := spawn(t, "plain")
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateIdle)
	})
	t.Run("killed while awaiting review", func(t *testing.T) {
		inst := spawn(t, "plain")
		done(t, inst)
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateAwaitingReview)
	})
	t.Run("killed while verifying", func(t *testing.T) {
		inst := spawn(t, "plain")
		review(t, done(t, inst))
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateVerifying)
	})
	t.Run("killed while escalated", func(t *testing.T) {
		inst := spawn(t, "strict")
		escalate(t, done(t, inst))
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateEscalated)
	})
	t.Run("killed while aborting", func(t *testing.T) {
		inst := spawn(t, "plain")
		if _, err := inst.PromptAsync(t.Context(), "/faux-ui", fleet.PromptOptions{}); err != nil {
			t.Fatal(err)
		}
		tf.waitChange(t, "the command's dialog", func(c fleet.Change) bool {
			return c.Kind == fleet.ChangeUIRequest && c.InstanceID == inst.ID()
		})
		if err := inst.Abort(t.Context()); err != nil { // the dialog does not end
			t.Fatal(err)
		}
		mustState(t, inst, fleet.StateAborting)
		kill(t, inst)
		transition(t, inst, fleet.EventWorkerGone, fleet.StateAborting)
	})
	t.Run("stopped while running", func(t *testing.T) {
		inst := spawn(t, "plain")
		if _, err := inst.PromptAsync(t.Context(), "delay: 120000\nsay: never said", fleet.PromptOptions{}); err != nil {
			t.Fatal(err)
		}
		mustState(t, inst, fleet.StateRunning)
		stop(t, inst)
		transition(t, inst, fleet.EventStopRequested, fleet.StateRunning)
	})
	t.Run("stopped while awaiting review", func(t *testing.T) {
		inst := spawn(t, "plain")
		done(t, inst)
		stop(t, inst)
		transition(t, inst, fleet.EventStopRequested, fleet.StateAwaitingReview)
	})
	t.Run("stopped while verifying", func(t *testing.T) {
		inst := spawn(t, "plain")
		review(t, done(t, inst))
		stop(t, inst)
		transition(t, inst, fleet.EventStopRequested, fleet.StateVerifying)
	})
	t.Run("stop forced", func(t *testing.T) {
		inst := spawnWith(t, "plain", map[string]string{"PIFLEET_TEST_DEAF": "1"})
		stop(t, inst)
		transition(t, inst, fleet.EventStoppedForced, fleet.StateStopping)
		for _, i := range tf.Status(t.Context()).Instances {
			if i.InstanceID == inst.ID() && i.EndReason != "forced" {
				t.Errorf("end reason %q, want forced", i.EndReason)
			}
		}
	})
	t.Run("stopped while escalated", func(t *testing.T) {
		inst := spawn(t, "strict")
		escalate(t, done(t, inst))
		stop(t, inst)
		transition(t, inst, fleet.EventStopRequested, fleet.StateEscalated)
	})
}

// Every way a spawn can end, from each step of the agent's provisioning:
// a registry given as a file URL on another host (refused once accepted),
// an unreachable registry with nothing cached (refused while
// provisioning), the same with the bundle cached (degraded, then started),
// and a worker that cannot start after a degraded sync (refused).
func TestEverySpawnStepCanFail(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, ps := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) {
		// A worker whose environment says so fails to start.
		c.PiCommand = append([]string{"/bin/sh", "-c", `[ -n "$PIFLEET_TEST_FAIL_START" ] && exit 7; exec "$0" "$@"`}, c.PiCommand...)
	})
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	down := "http://" + refusedAddr(t)

	// spawnWith spawns "plain" with env and returns the instance's walk of
	// transitions (event from → to), and Spawn's error.
	spawnWith := func(t *testing.T, env map[string]string) ([]string, error) {
		t.Helper()
		sub := tf.Subscribe(256)
		defer sub.Close()
		inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain", Env: env})
		if err == nil {
			t.Cleanup(func() {
				if err := inst.Stop(context.Background()); err != nil {
					t.Errorf("stopping the worker: %v", err)
				}
			})
		}
		var walk []string
		for {
			select {
			case c := <-sub.C:
				if c.Kind != fleet.ChangeInstanceState {
					continue
				}
				walk = append(walk, c.Event+" "+c.From+"→"+c.To)
				if c.To == string(fleet.StateIdle) || c.To == string(fleet.StateFailed) {
					return walk, err
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the spawn never ended; walk %v, err %v", walk, err)
			}
		}
	}
	last := func(walk []string) string { return walk[len(walk)-1] }

	t.Run("registry refused once accepted", func(t *testing.T) {
		walk, err := spawnWith(t, map[string]string{"PI_FLEET_SERVER": "file://elsewhere/registry"})
		if err == nil || last(walk) != "spawnError spawning→failed" {
			t.Fatalf("walk %v, err %v; want spawnError from spawning", walk, err)
		}
	})
	t.Run("registry down, nothing cached", func(t *testing.T) {
		walk, err := spawnWith(t, map[string]string{"PI_FLEET_SERVER": down})
		if err == nil || last(walk) != "spawnError provisioning→failed" {
			t.Fatalf("walk %v, err %v; want spawnError from provisioning", walk, err)
		}
	})
	t.Run("registry down, bundle cached", func(t *testing.T) {
		if _, err := spawnWith(t, nil); err != nil { // caches the bundle
			t.Fatal(err)
		}
		walk, err := spawnWith(t, map[string]string{"PI_FLEET_SERVER": down})
		if err != nil || !slices.Contains(walk, "cacheDegraded provisioning→degraded_cache") || last(walk) != "spawned degraded_cache→idle" {
			t.Fatalf("walk %v, err %v; want a degraded start", walk, err)
		}
	})
	t.Run("worker fails after a degraded sync", func(t *testing.T) {
		walk, err := spawnWith(t, map[string]string{"PI_FLEET_SERVER": down, "PIFLEET_TEST_FAIL_START": "1"})
		if err == nil || last(walk) != "spawnError degraded_cache→failed" {
			t.Fatalf("walk %v, err %v; want spawnError from degraded_cache", walk, err)
		}
	})
}
