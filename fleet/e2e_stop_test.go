//go:build unix

package fleet_test

import (
	"context"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// workerKinds are the workers each end-to-end case of issue 12 runs with.
var workerKinds = map[string]pitest.Kind{"scripted": pitest.Scripted, "pi": pitest.RealPi}

// registryFor is a registry with a bundle for workers of kind: "plain" for
// the scripted worker, "faux" for the real pi (the test skips without it).
func registryFor(t *testing.T, kind pitest.Kind) (reg, bundle string) {
	t.Helper()
	reg = t.TempDir()
	if kind == pitest.RealPi {
		pitest.Find(t)
		publishFaux(t, reg)
		return reg, "faux"
	}
	publish(t, reg, "plain", `{}`)
	return reg, "plain"
}

// fleetWithAgent runs the real agent daemon with workers of kind (mod
// has a last word on its configuration) and a fleet connected to it. It
// returns the agent's state directory too, where e2ekit finds its shims
// and workers.
func fleetWithAgent(t *testing.T, kind pitest.Kind, reg string, mod func(*agent.Config), opts ...fleet.Option) (tf *testFleet, ps pitest.Spec, agentState string) {
	t.Helper()
	addr, ps := startAgentWith(t, kind, reg, func(c *agent.Config) {
		agentState = c.StateDir
		if mod != nil {
			mod(c)
		}
	})
	tf = startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}}, opts...)
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	return tf, ps, agentState
}

// settleWithin bounds how long a prompt that runs an extension command
// may take once the command returned: far below the callers' deadlines.
const settleWithin = 20 * time.Second

// Stopping always works, and no prompt waits forever (issue 12): a prompt
// that runs an extension command (pi sends no agent_start or agent_end)
// settles when its answer arrives; an abort that does not end such a
// command runs out at Config.AbortTimeout and the instance is running
// again; stop is accepted while aborting and ends the worker. With the
// scripted worker and with the real pi, through the faux /faux-ui command.
func TestStopAlwaysWorks(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for name, kind := range workerKinds {
		t.Run(name, func(t *testing.T) {
			reg, bundle := registryFor(t, kind)
			tf, ps, _ := fleetWithAgent(t, kind, reg, nil, func(c *fleet.Config) { c.AbortTimeout = time.Second })
			inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: bundle})
			if err != nil {
				t.Fatal(err)
			}

			// A command whose dialog times out at once: its answer is the
			// prompt's end.
			ctx, cancel := context.WithTimeout(t.Context(), settleWithin)
			text, err := inst.Prompt(ctx, "/faux-ui 1", fleet.PromptOptions{})
			cancel()
			if err != nil || text != "" {
				t.Fatalf("Prompt(/faux-ui 1) = %q, %v; want it settled with no text", text, err)
			}
			if st := inst.State(); st != fleet.StateIdle {
				t.Fatalf("after the command: %s", st)
			}
			// The worker still answers prompts.
			if text, err := inst.Prompt(t.Context(), "say: still here", fleet.PromptOptions{}); err != nil || text != "still here" {
				t.Fatalf("Prompt after the command = %q, %v", text, err)
			}

			// A command waiting on a dialog nobody answers: abort does not
			// end it.
			run, err := inst.PromptAsync(t.Context(), "/faux-ui", fleet.PromptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tf.waitChange(t, "the command's dialog", func(c fleet.Change) bool {
				return c.Kind == fleet.ChangeUIRequest && c.InstanceID == inst.ID()
			})
			if err := inst.Abort(t.Context()); err != nil {
				t.Fatal(err)
			}
			tf.waitChange(t, "the abort's deadline", func(c fleet.Change) bool {
				return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.Event == string(fleet.EventAbortTimedOut)
			})
			if st := inst.State(); st != fleet.StateRunning {
				t.Fatalf("after the abort's deadline: %s, want running", st)
			}
			if err := inst.Abort(t.Context()); err != nil {
				t.Fatal(err)
			}
			if st := inst.State(); st != fleet.StateAborting {
				t.Fatalf("after the second abort: %s", st)
			}
			ctx, cancel = context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			if err := inst.Stop(ctx); err != nil {
				t.Fatalf("Stop while aborting: %v", err)
			}
			if st := inst.State(); st != fleet.StateStopped {
				t.Fatalf("after Stop: %s", st)
			}
			select {
			case <-run.Done():
			default:
				t.Error("the prompt of the stopped worker is still waiting")
			}
		})
	}
}
