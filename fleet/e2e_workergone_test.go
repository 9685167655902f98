//go:build linux

package fleet_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/e2ekit"
)

// goneWithin bounds how long a caller may still wait once its worker
// died: far below the callers' own deadlines (60 s), so that a caller
// released only by its deadline fails the test.
const goneWithin = 20 * time.Second

// A worker that dies while its agent is connected is known at once
// (issue 12, "exit notice"): killing the worker process (kill -9 of the
// pid found through the process tree) during an untracked prompt, or its
// shim during a tracked task, moves the instance to stopped with the
// reason, releases every waiter with ErrWorkerGone, and ends the task
// aborted without a review of the dead worker. With the scripted worker
// and with the real pi.
func TestWorkerDeathIsKnownAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for name, kind := range workerKinds {
		t.Run(name, func(t *testing.T) {
			reg, bundle := registryFor(t, kind)
			tf, ps, stateDir := fleetWithAgent(t, kind, reg, nil)
			spawn := func() *fleet.Instance {
				inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: bundle})
				if err != nil {
					t.Fatal(err)
				}
				return inst
			}
			started := func() (fleet.PromptOptions, <-chan struct{}) {
				ch := make(chan struct{}, 1)
				return fleet.PromptOptions{OnEvent: func(e fleet.Event) {
					if e.Type == "agent_start" {
						select {
						case ch <- struct{}{}:
						default:
						}
					}
				}}, ch
			}
			waitStarted := func(ch <-chan struct{}) {
				select {
				case <-ch:
				case <-time.After(60 * time.Second):
					t.Fatal("the run never started")
				}
			}
			kill := func(inst *fleet.Instance, shim bool) {
				shimPID, workerPID, err := e2ekit.WorkerProcesses(stateDir, inst.ID())
				if err != nil {
					t.Fatal(err)
				}
				pid := workerPID
				if shim {
					pid = shimPID
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			endReason := func(id string) string {
				for _, i := range tf.Status(t.Context()).Instances {
					if i.InstanceID == id {
						return i.EndReason
					}
				}
				return ""
			}
			slow := "delay: 120000\nsay: never said"

			t.Run("worker killed during a prompt", func(t *testing.T) {
				inst := spawn()
				opts, ch := started()
				run, err := inst.PromptAsync(t.Context(), slow, opts)
				if err != nil {
					t.Fatal(err)
				}
				waitStarted(ch)
				kill(inst, false)
				ctx, cancel := context.WithTimeout(t.Context(), goneWithin)
				defer cancel()
				_, err = run.Wait(ctx)
				var gone *fleet.WorkerGoneError
				if !errors.Is(err, fleet.ErrWorkerGone) || !errors.As(err, &gone) || !errors.Is(err, fleet.ErrInstanceEnded) {
					t.Fatalf("Wait = %v, want a *WorkerGoneError", err)
				}
				if !strings.Contains(gone.Reason, "signal KILL") {
					t.Errorf("reason %q does not say the worker was killed", gone.Reason)
				}
				if st := inst.State(); st != fleet.StateStopped {
					t.Errorf("state %s, want stopped", st)
				}
				if r := endReason(inst.ID()); !strings.Contains(r, "signal KILL") {
					t.Errorf("end reason %q", r)
				}
				if _, err := inst.Prompt(t.Context(), "say: again", fleet.PromptOptions{}); !errors.Is(err, fleet.ErrInvalidState) {
					t.Errorf("prompt to the dead worker: %v", err)
				}
			})

			t.Run("shim killed during a task", func(t *testing.T) {
				inst := spawn()
				opts, ch := started()
				task, err := inst.Submit(t.Context(), slow, opts)
				if err != nil {
					t.Fatal(err)
				}
				waitStarted(ch)
				kill(inst, true)
				ctx, cancel := context.WithTimeout(t.Context(), goneWithin)
				defer cancel()
				info, err := task.Wait(ctx)
				if !errors.Is(err, fleet.ErrWorkerGone) {
					t.Fatalf("Task.Wait = %v, want ErrWorkerGone", err)
				}
				if info.State != fleet.TaskAborted {
					t.Errorf("task state %s, want aborted", info.State)
				}
				if r := tf.report(t); r.TaskID != task.ID() || r.Status != "aborted" {
					t.Errorf("report %+v, want the task aborted", r)
				}
				if st := inst.State(); st != fleet.StateStopped {
					t.Errorf("state %s, want stopped (no review of a dead worker)", st)
				}
				if r := endReason(inst.ID()); !strings.Contains(r, "shim was lost") {
					t.Errorf("end reason %q", r)
				}
				if got := task.Info().State; got != fleet.TaskAborted {
					t.Errorf("task state after its task_done: %s", got)
				}
			})
		})
	}
}
