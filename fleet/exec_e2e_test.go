//go:build unix

package fleet_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

func execAgent(mod func(*agent.Config)) func(*agent.Config) {
	return func(c *agent.Config) {
		c.ExecPolicy = agent.ExecFull
		c.ExecShell = []string{"/bin/bash", "-c"} // no login profile on a shared test machine
		if mod != nil {
			mod(c)
		}
	}
}

// Checklist 90 and the SDK's exec: a command on the agent's machine with
// its output in order, without a worker; the instance form runs in the
// worker's tree; abort and timeout are reported.
func TestExecThroughTheFleet(t *testing.T) {
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, ps := startAgentWith(t, pitest.Scripted, reg, execAgent(nil))
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	ctx := t.Context()

	var mu sync.Mutex
	var seqs []int
	var streamed strings.Builder
	x, err := tf.Exec(ctx, "worker-01", fleet.ExecRequest{Shell: "for i in 1 2 3; do echo out$i; echo err$i >&2; done; exit 4",
		Cwd: ps.Dir, OnOutput: func(c fleet.ExecChunk) {
			mu.Lock()
			defer mu.Unlock()
			seqs = append(seqs, c.Seq)
			if c.Stream == transport.Stdout {
				streamed.Write(c.Data)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := x.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out1\nout2\nout3\n" || string(res.Stderr) != "err1\nerr2\nerr3\n" || res.ExitCode == nil || *res.ExitCode != 4 {
		t.Errorf("result %+v stdout %q stderr %q", res, res.Stdout, res.Stderr)
	}
	mu.Lock()
	if streamed.String() != string(res.Stdout) {
		t.Errorf("streamed %q", streamed.String())
	}
	for i, s := range seqs {
		if s != i {
			t.Errorf("seqs %v", seqs)
			break
		}
	}
	mu.Unlock()
	if st := tf.Status(ctx); len(st.Instances) != 0 {
		t.Errorf("exec created a worker: %+v", st.Instances)
	}

	inst, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	x, err = inst.Exec(ctx, fleet.ExecRequest{Argv: []string{"pwd"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = x.Wait(ctx)
	want, _ := filepath.EvalSymlinks(ps.Dir)
	if err != nil || strings.TrimSpace(string(res.Stdout)) != want {
		t.Errorf("pwd in the instance: %q %v", res.Stdout, err)
	}
	if _, err := inst.Exec(ctx, fleet.ExecRequest{Argv: []string{"pwd"}, Cwd: ".."}); !errors.Is(err, fleet.ErrExecFailed) {
		t.Errorf("escaping the tree: %v", err)
	}

	x, err = tf.Exec(ctx, "worker-01", fleet.ExecRequest{Argv: []string{"sleep", "300"}, Cwd: ps.Dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := x.Wait(ctx); err != nil || !res.Aborted || res.Signal != "SIGTERM" {
		t.Errorf("aborted %+v %v", res, err)
	}
	if err := x.Abort(ctx); err != nil {
		t.Errorf("abort after the end: %v", err)
	}
	x, err = tf.Exec(ctx, "worker-01", fleet.ExecRequest{Argv: []string{"sleep", "300"}, Cwd: ps.Dir, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := x.Wait(ctx); err != nil || !res.TimedOut {
		t.Errorf("timed out %+v %v", res, err)
	}
	list, err := tf.Executions(ctx, "worker-01")
	if err != nil || len(list) != 4 || list[0].State != transport.ExecExited || !list[0].TimedOut || !list[1].Aborted {
		t.Errorf("executions %+v %v", list, err)
	}
	var ee *fleet.ExecError
	if _, err := tf.Exec(ctx, "worker-01", fleet.ExecRequest{Argv: []string{"true"}, Cwd: "/no/such/dir"}); !errors.As(err, &ee) || ee.Code != "exec_failed" {
		t.Errorf("bad cwd: %v", err)
	}
}

// Exec needs the agent's exec plane and the steer policy.
func TestExecRefusals(t *testing.T) {
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, ps := startAgentWith(t, pitest.Scripted, reg, nil)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	var ee *fleet.ExecError
	if _, err := tf.Exec(t.Context(), "worker-01", fleet.ExecRequest{Argv: []string{"true"}, Cwd: ps.Dir}); !errors.As(err, &ee) || ee.Code != "exec_disabled" {
		t.Errorf("exec off: %v", err)
	}
	addr2, ps2 := startAgentWith(t, pitest.Scripted, reg, execAgent(nil))
	tf2 := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr2}}},
		fleet.WithPrompter(trust.Fixed(trust.Allow)))
	tf2.waitAgent(t, "worker-01", transport.StateEstablished)
	if _, err := tf2.Exec(t.Context(), "worker-01", fleet.ExecRequest{Argv: []string{"true"}, Cwd: ps2.Dir}); !errors.Is(err, trust.ErrPolicyRefused) {
		t.Errorf("policy allow: %v", err)
	}
	if _, err := tf2.Exec(t.Context(), "worker-01", fleet.ExecRequest{Cwd: ps2.Dir}); err == nil {
		t.Error("no command accepted")
	}
}
