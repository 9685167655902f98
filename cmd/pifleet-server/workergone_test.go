//go:build linux

package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/pitest"
)

// A blocking `prompt --wait` (and `prompt --task --wait`) ends at once
// with worker_gone when its worker dies (issue 12): the worker process is
// killed (kill -9 of the pid found through the process tree) under the
// first, its shim under the second. Without the exit notice both would
// wait until their deadline.
func TestPromptWaitEndsWhenTheWorkerDies(t *testing.T) {
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	if _, err := registry.Publish(reg, "plain", source(t, map[string]string{"bundle.json": `{}`}), registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	addr, stateDir := startAgentIn(t, reg, pitest.Scripted)
	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + addr}, WhoisStatic: []string{"127.0.0.1=box"}}
	s, c := startServe(t, cmd)
	api := "--api=" + s.API.String()
	if status, out, errOut := runCLI(t, "trust", "set", "box", "steer", api); status != 0 {
		t.Fatalf("trust set: %d %s%s", status, out, errOut)
	}
	awaitAgentState(t, c, "box", "established")
	w, err := c.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	for _, tc := range []struct {
		name  string
		args  []string
		shim  bool
		state string // of the task, when there is one
	}{
		{"prompt --wait, worker killed", []string{"prompt", "--wait"}, false, ""},
		{"prompt --task --wait, shim killed", []string{"prompt", "--task", "--wait"}, true, "aborted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out, errOut := runCLI(t, "spawn", api, "--agent=box", "--cwd="+dir, "--bundle=plain")
			if status != 0 {
				t.Fatalf("spawn: %d %s", status, errOut)
			}
			id := strings.TrimSpace(out)
			type result struct {
				status      int
				out, errOut string
			}
			done := make(chan result, 1)
			go func() {
				status, out, errOut := runCLI(t, append(append(tc.args, api, id), "delay: 120000\nsay: never said")...)
				done <- result{status, out, errOut}
			}()
			until(t, w, "the run's start", func(ch controlapi.Change) bool {
				return ch.Kind == controlapi.ChangeEvent && ch.InstanceID == id && ch.Event == "agent_start"
			})
			shimPID, workerPID, err := e2ekit.WorkerProcesses(stateDir, id)
			if err != nil {
				t.Fatal(err)
			}
			pid := workerPID
			if tc.shim {
				pid = shimPID
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-done:
				if r.status == 0 || !strings.Contains(r.errOut, "worker_gone") {
					t.Errorf("%v: status %d, stdout %q, stderr %q; want worker_gone", tc.args, r.status, r.out, r.errOut)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("%v still waits 20 s after its worker died", tc.args)
			}
			st, err := c.Status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range st.Instances {
				if in.ID == id && in.State != "stopped" {
					t.Errorf("instance %s is %s, want stopped", id, in.State)
				}
			}
			if tc.state != "" {
				tasks, err := c.Tasks(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				for _, tk := range tasks {
					if tk.InstanceID == id && tk.State != tc.state {
						t.Errorf("task %s is %s, want %s", tk.ID, tk.State, tc.state)
					}
				}
			}
		})
	}
}

// An orchestrator waiting for a task whose worker dies mid-run is woken
// once, told that the task ended without a result to review and why the
// worker ended; the review tools refuse the dead task, as the wake says.
func TestWorkerDeathWakesTheOrchestrator(t *testing.T) {
	fl := startLLMFleet(t, pitest.Scripted, controlapi.PolicySteer, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*e2eWait)
	defer cancel()
	wakes := fl.wakes(t, ctx)
	w, err := fl.c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	id, task := fl.startTask(t, ctx, "delay: 120000\nsay: never said")
	until(t, w, "the run's start", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeEvent && ch.InstanceID == id && ch.Event == "agent_start"
	})
	_, workerPID, err := e2ekit.WorkerProcesses(fl.agentDir, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(workerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wake, err := wakes.Next()
	if err != nil {
		t.Fatal(err)
	}
	if wake.TaskID != task || wake.Status != "aborted" {
		t.Fatalf("wake: %+v", wake)
	}
	for _, want := range []string{"ended without a result to review: it is aborted", "worker has stopped", "signal KILL"} {
		if !strings.Contains(wake.Text, want) {
			t.Errorf("the wake does not say %q:\n%s", want, wake.Text)
		}
	}
	if strings.Contains(wake.Text, "remote_accept") {
		t.Errorf("the wake asks for a verdict on a dead worker's task:\n%s", wake.Text)
	}
	var e *controlapi.Error
	if _, err := fl.call(ctx, "remote_accept", `{"taskId":"`+task+`"}`); !errors.As(err, &e) || e.Code != controlapi.CodeInvalidState {
		t.Errorf("remote_accept of the ended task: %v, want invalid_state", err)
	}
}
