package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
	"example.com/pifleet/transport/trust"
)

func TestAPIErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   controlapi.Code
		detail string
	}{
		{fmt.Errorf("%w: %q", fleet.ErrUnknownInstance, "i-1"), controlapi.CodeUnknownInstance, ""},
		{fmt.Errorf("%w: %q", fleet.ErrUnknownTask, "t-1"), controlapi.CodeUnknownTask, ""},
		{fmt.Errorf("%w: %q", fleet.ErrUnknownAgent, "a"), controlapi.CodeUnknownAgent, ""},
		{fmt.Errorf("%w: r of i", fleet.ErrUnknownUIRequest), controlapi.CodeUnknownUIRequest, ""},
		{&fleet.SpawnError{Agent: "a", Bundle: "b", Code: "max_workers", Message: "full"}, controlapi.CodeSpawnError, "max_workers"},
		{&bundle.PlatformError{Bundle: "b", Platform: "linux-x64", Supported: []string{"darwin-arm64"}}, controlapi.CodeSpawnError, "platform_mismatch"},
		{fmt.Errorf("%w: %w", fleet.ErrModelPinned, &transport.RemoteError{Code: "model_pinned"}), controlapi.CodeModelPinned, ""},
		{fmt.Errorf("fleet: spawn: %w", &bundle.HashPinError{Bundle: "b", Pinned: "sha256:aa", Served: "sha256:bb"}), controlapi.CodeSpawnError, "bundle_hash_mismatch"},
		{&fleet.RebundleError{InstanceID: "i", Bundle: "a", Target: "b", Code: "reload_failed"}, controlapi.CodeRebundleFailed, "reload_failed"},
		{&fleet.StateError{Kind: "instance", ID: "i", State: "stopped", Op: "prompt"}, controlapi.CodeInvalidState, ""},
		{fleet.ErrInstanceEnded, controlapi.CodeInvalidState, ""},
		{fmt.Errorf("task t-1 did not finish: %w", &fleet.WorkerGoneError{InstanceID: "i", Reason: "killed by signal KILL"}), controlapi.CodeWorkerGone, ""},
		{&trust.PolicyError{Policy: trust.Allow, Operation: trust.OpSteer}, controlapi.CodePolicyRefused, ""},
		{fmt.Errorf("%w: a", fleet.ErrNotConnected), controlapi.CodeNotConnected, ""},
		{fleet.ErrNotSupported, controlapi.CodeNotSupported, ""},
		{fleet.ErrClosed, controlapi.CodeUnavailable, ""},
		{fmt.Errorf("fleet: spawn: %w", &registry.Error{Code: bundle.CodeNotFound, Bundle: "x"}), controlapi.CodeUnknownBundle, ""},
		{trust.ErrBadPolicy, controlapi.CodeBadRequest, ""},
		{&trust.BadPolicyError{Policy: "bogus"}, controlapi.CodeBadRequest, ""},
		{&fleet.DispositionError{Disposition: "archive"}, controlapi.CodeBadRequest, ""},
		{&fleet.DeliveryModeError{Mode: "squash"}, controlapi.CodeBadRequest, ""},
		{&fleet.UnknownSessionError{Ref: "baseline:api"}, controlapi.CodeUnknownSession, ""},
		{fmt.Errorf("%w: /s/b.jsonl (baseline:api) is a pinned session; resume it as a clone", fleet.ErrSessionPinned), controlapi.CodeSessionPinned, ""},
		{fmt.Errorf("%w: /s/c.jsonl is attached to instance i-2", fleet.ErrSessionBusy), controlapi.CodeSessionBusy, ""},
		{fmt.Errorf("fleet: baseline: %w", session.ErrInvalidName), controlapi.CodeBadRequest, ""},
		{fmt.Errorf("fleet: baseline: %w", &fleet.FileError{Op: "repo_head", Code: "not_found", Message: "cwd /x is not a directory"}),
			controlapi.CodeBadRequest, "not_found"},
		{&fleet.FileError{Op: "repo_head", Code: "git_failed", Message: "timeout"}, controlapi.CodeInternal, ""},
		// pi refused the command (a user error, not the server's): the
		// set_model of a model pi does not know, as the SDK returns it.
		{fmt.Errorf("fleet: set_model: %w", &pirpc.CommandError{Command: "set_model", Message: "Model not found: nope/nope"}),
			controlapi.CodeWorkerRefused, ""},
		{&fleet.SpawnStoppedError{Agent: "a", Bundle: "b", SpawnID: "spawn-1"}, controlapi.CodeInvalidState, ""},
		// An agent that answers with the wrong frame is at fault, not the caller.
		{&fleet.UnexpectedAnswerError{Request: "fs_read", Want: "fs_result", Got: "tools_set"}, controlapi.CodeInternal, ""},
		{errors.New("disk full"), controlapi.CodeInternal, ""},
	} {
		var e *controlapi.Error
		if got := apiError(tc.err); !errors.As(got, &e) || e.Code != tc.code || e.Detail != tc.detail || e.Message != tc.err.Error() {
			t.Errorf("apiError(%v) = %#v; want code %s detail %q and the original text", tc.err, got, tc.code, tc.detail)
		}
	}
	if apiError(nil) != nil {
		t.Error("apiError(nil) != nil")
	}
}

func TestAgentCheck(t *testing.T) {
	for _, tc := range []struct {
		a      fleet.AgentStatus
		result controlapi.CheckResult
		detail string
	}{
		{fleet.AgentStatus{Name: "a", State: transport.StateEstablished, Addr: "1.2.3.4:9788", Machine: "a", Policy: trust.Steer},
			controlapi.CheckPass, "connected at 1.2.3.4:9788"},
		{fleet.AgentStatus{Name: "a", State: transport.StateRejected, LastError: "trust: machine is denied"},
			controlapi.CheckFail, "whois denied: trust: machine is denied"},
		{fleet.AgentStatus{Name: "a", State: transport.StateLost, Addresses: []string{"h:1", "h:2"}, LastError: "connection refused"},
			controlapi.CheckFail, "unreachable (lost) at h:1,h:2: connection refused"},
		{fleet.AgentStatus{Name: "a", State: transport.StateConnecting, Addresses: []string{"h:1"}},
			controlapi.CheckFail, "unreachable (connecting) at h:1: not connected yet"},
	} {
		c := agentCheck(tc.a)
		if c.Name != "agent a" || c.Result != tc.result || !strings.HasPrefix(c.Detail, tc.detail) {
			t.Errorf("agentCheck(%s) = %+v; want %s %q…", tc.a.State, c, tc.result, tc.detail)
		}
	}
}

func TestRegistryCheck(t *testing.T) {
	root := filepath.Join(t.TempDir(), "reg")
	if c := registryCheck(root); c.Result != controlapi.CheckPass || c.Detail != "no bundle published in "+root+" yet" {
		t.Errorf("missing registry: %+v", c)
	}
	src := source(t, map[string]string{"a.md": "alpha\n", "b/c.md": "gamma\n"})
	for _, name := range []string{"one", "two"} {
		if _, err := registry.Publish(root, name, src, registry.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if c := registryCheck(root); c.Result != controlapi.CheckPass || c.Detail != "2 bundle(s) intact in "+root {
		t.Errorf("intact registry: %+v", c)
	}
	// Same size, other content; and a missing file.
	if err := os.WriteFile(filepath.Join(root, "two", "files", "a.md"), []byte("ALPHA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "two", "files", "b", "c.md")); err != nil {
		t.Fatal(err)
	}
	c := registryCheck(root)
	if c.Result != controlapi.CheckFail || c.Detail != "1 of 2 bundle(s) corrupt: bundle two: a.md: content does not match its hash, b/c.md: missing" {
		t.Errorf("corrupt registry: %+v", c)
	}
}

func TestChangeConversion(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := changeOf(fleet.Change{Kind: fleet.ChangeUIRequest, At: at, InstanceID: "i", UI: &fleet.UIRequest{InstanceID: "i", RequestID: "r", Kind: "confirm", Title: "Go?"}})
	if c.Kind != controlapi.ChangeUIRequest || string(c.Data) != `{"id":"r","instanceId":"i","kind":"confirm","title":"Go?"}` {
		t.Errorf("ui change: %+v %s", c, c.Data)
	}
	c = changeOf(fleet.Change{Kind: fleet.ChangeEvent, WorkerEvent: new(fleet.NewEvent("", "", "agent_end", []byte(`{"type":"agent_end"}`), time.Time{}))})
	if c.Data != nil || c.Worker == nil || string(c.Worker.Raw()) != `{"type":"agent_end"}` {
		t.Errorf("event change: %s %v", c.Data, c.Worker)
	}
	c = changeOf(fleet.Change{Kind: fleet.ChangeTaskDone, TaskID: "t", Report: &fleet.TaskReport{Seq: 2, Status: "settled", Summary: "ok"}})
	if string(c.Data) != `{"seq":2,"status":"settled","summary":"ok"}` {
		t.Errorf("task_done change: %s", c.Data)
	}
}
