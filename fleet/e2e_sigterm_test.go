//go:build linux

package fleet_test

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// signalExit bounds how long pifleet-agent may take to exit on SIGTERM
// (issue 12: within 5 s, with any number of workers attached).
const signalExit = 5 * time.Second

// SIGTERM ends pifleet-agent within 5 s with workers attached (freshly
// spawned, one in the middle of a task), and again with the same workers
// re-adopted; the workers keep running under their shims, and each next
// agent re-adopts them: the task started under the first agent settles
// under the third. With the scripted worker and with the real pi.
func TestAgentSIGTERMLeavesItsWorkersToTheNext(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end with processes")
	}
	for name, kind := range workerKinds {
		t.Run(name, func(t *testing.T) {
			reg, bundle := registryFor(t, kind)
			workers := 3
			if kind == pitest.RealPi {
				workers = 2 // each is a node process
			}
			aw := newAgentWorldOf(t, kind, "worker-01", "orchestrator", "127.0.0.1=orchestrator/ana@example")
			release := gate(t, aw.cwd, "gate")
			agentProc := aw.start(t)
			tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{aw.addr}}})
			tf.waitAgent(t, "worker-01", transport.StateEstablished)
			var insts []*fleet.Instance
			for range workers {
				inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: aw.cwd, Bundle: bundle})
				if err != nil {
					t.Fatal(err)
				}
				insts = append(insts, inst)
			}
			t.Cleanup(func() {
				for _, inst := range insts {
					_ = inst.Stop(context.Background())
				}
			})
			blocked := make(chan struct{})
			var once sync.Once
			task, err := insts[0].Submit(t.Context(), "bash: cat gate", fleet.PromptOptions{OnEvent: func(e fleet.Event) {
				if e.Type == "tool_execution_start" {
					once.Do(func() { close(blocked) })
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-blocked:
			case <-time.After(procWait):
				t.Fatal("the worker never started its tool")
			}
			pids := map[string]int{}
			for _, inst := range insts {
				_, pid, err := e2ekit.WorkerProcesses(aw.stateDir, inst.ID())
				if err != nil {
					t.Fatal(err)
				}
				pids[inst.ID()] = pid
			}

			// sigterm ends the agent in time and leaves every worker
			// running: the same process under its shim.
			sigterm := func(what string) {
				t.Helper()
				start := time.Now()
				if err := agentProc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				select {
				case <-agentProc.done:
				case <-time.After(signalExit):
					t.Fatalf("pifleet-agent with %s workers still running %s after SIGTERM", what, signalExit)
				}
				if !agentProc.cmd.ProcessState.Success() {
					t.Errorf("pifleet-agent exited with %v", agentProc.cmd.ProcessState)
				}
				t.Logf("pifleet-agent with %d %s workers exited %v after SIGTERM", len(insts), what, time.Since(start))
				for id, pid := range pids {
					_, now, err := e2ekit.WorkerProcesses(aw.stateDir, id)
					if err != nil || now != pid {
						t.Fatalf("worker %s (pid %d) after the agent's exit: pid %d, %v", id, pid, now, err)
					}
				}
			}
			// readopted waits until the fleet sees every instance back.
			readopted := func() {
				t.Helper()
				tf.waitUntil(t, "every worker re-adopted", func(s fleet.Status) bool {
					n := 0
					for _, i := range s.Instances {
						if i.State == fleet.StateIdle || i.State == fleet.StateRunning {
							n++
						}
					}
					return n == len(insts)
				})
				if st := insts[0].State(); st != fleet.StateRunning {
					t.Fatalf("the worker in its task is %s after the re-adoption", st)
				}
			}

			sigterm("spawned")
			tf.waitAgent(t, "worker-01", transport.StateLost)
			agentProc = aw.start(t)
			readopted()
			sigterm("re-adopted")
			agentProc = aw.start(t)
			readopted()

			release()
			if r := tf.report(t); r.TaskID != task.ID() || r.Status != "settled" {
				t.Fatalf("report %+v", r)
			}
			for _, inst := range insts[1:] {
				if text, err := inst.Prompt(t.Context(), "say: still here", fleet.PromptOptions{}); err != nil || text != "still here" {
					t.Errorf("prompt of %s after two agent restarts = %q, %v", inst.ID(), text, err)
				}
			}
			for _, inst := range insts {
				if err := inst.Stop(t.Context()); err != nil {
					t.Error(err)
				}
			}
			agentProc.terminate(t)
		})
	}
}

// newAgentWorldOf is newAgentWorld with workers of either kind.
func newAgentWorldOf(t *testing.T, kind pitest.Kind, machine, pin, whois string) *agentWorld {
	t.Helper()
	if kind == pitest.Scripted {
		return newAgentWorld(t, machine, pin, whois)
	}
	_, bin := binaries(t)
	ps := pitest.Command(t, kind, pitest.Options{})
	aw := newAgentWorld(t, machine, pin, whois)
	aw.bin, aw.cwd = bin, ps.Dir
	for i := range aw.args {
		if i > 0 && aw.args[i-1] == "--pi" {
			aw.args[i] = ps.Path
		}
	}
	// Offline, and nothing of the machine's own pi configuration.
	for _, a := range []string{"--offline", "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files"} {
		aw.args = append(aw.args, "--pi-arg="+a)
	}
	aw.env = processEnv(ps.Env, "PIFLEET_SESSIONS_ROOT="+filepath.Join(ps.AgentDir, "sessions"))
	return aw
}
