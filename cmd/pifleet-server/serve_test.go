package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/testnet"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// startAgent runs a real agent on loopback that obeys the server "box".
func startAgent(t *testing.T) string {
	t.Helper()
	whois, err := identity.ParseStatic("127.0.0.1=box")
	if err != nil {
		t.Fatal(err)
	}
	return runAgent(t, agent.Config{Machine: "box", Listen: "127.0.0.1:0", Pin: trust.Pin{Machine: "box"},
		Whois: whois, StateDir: t.TempDir(), SessionsPoll: -1})
}

// runAgent runs an in-process agent until the test ends and returns its
// address once it listens. Without ServerKeys it trusts the key of the
// first server that connects (each test's server has a key of its own).
func runAgent(t *testing.T, cfg agent.Config) string {
	t.Helper()
	if len(cfg.ServerKeys) == 0 {
		cfg.TrustFirstServerKey = true
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		// Close before waiting for Run: a worker still running (a test
		// that failed half way) holds Run until Close detaches it.
		cancel()
		a.Close()
		<-done
	})
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("agent: %v", err)
	}
	return a.Addr().String()
}

func closedPort(t *testing.T) string {
	return testnet.UnusedAddr(t, "127.0.0.1")
}

// awaitAgentState waits, through the watch stream, until agent name is
// in state (or already is).
func awaitAgentState(t *testing.T, c *controlapi.Client, name, state string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range st.Agents {
		if a.Name == name && a.State == state {
			return
		}
	}
	for {
		ch, err := s.Next()
		if err != nil {
			t.Fatalf("waiting for %s to be %s: %v", name, state, err)
		}
		if ch.Kind == controlapi.ChangeAgentState && ch.Agent == name && ch.To == state {
			return
		}
	}
}

// TestServe runs serve with a real fleet, a real agent and a missing one,
// and drives it with the client commands: doctor tells whois denied from
// unreachable, trust set lets the agent in, and the fleet's errors reach
// the client as typed codes.
func TestServe(t *testing.T) {
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	publishDefault(t, reg, map[string]string{"skills/a/SKILL.md": "# a\n"})
	cmd := &ServeCmd{
		StateDir:    filepath.Join(dir, "state"),
		Registry:    reg,
		Listen:      "127.0.0.1:0",
		Agent:       []string{"box=" + startAgent(t), "gone=" + closedPort(t)},
		WhoisStatic: []string{"127.0.0.1=box"},
	}
	s, c := startServe(t, cmd)
	if want := controlapi.DefaultAddr(cmd.StateDir); s.API != want {
		t.Errorf("API at %s, want the default %s", s.API, want)
	}
	api := "--api=" + s.API.String()

	// No trust decision for box and no terminal: the gate refuses it.
	awaitAgentState(t, c, "box", "rejected")
	status, out, errOut := runCLI(t, "doctor", api)
	for _, want := range [][3]string{
		{"PASS", "control api", "answering at " + s.API.String()},
		{"SKIP", "tailscale", "static identity map in force"},
		{"FAIL", "agent box", "whois denied"},
		{"FAIL", "agent gone", "unreachable ("}, // lost, or connecting again
		{"PASS", "bundle registry", "1 bundle(s) intact"},
		{"PASS", "permissions", "state directory, key and token private to this user"},
	} {
		if !hasCheck(out, want[0], want[1], want[2]) {
			t.Errorf("doctor lacks %v:\n%s", want, out)
		}
	}
	if status == 0 || !strings.Contains(errOut, "2 of 6 checks failed") {
		t.Errorf("doctor: status %d, %s", status, errOut)
	}
	// status and a spawn say how to let it in.
	hint := "run `pifleet-server trust set box steer` (or allow), then `pifleet-server retry box`"
	if _, out, _ := runCLI(t, "status", api); !strings.Contains(out, hint) {
		t.Errorf("status of a refused agent lacks the way in:\n%s", out)
	}
	if status, _, errOut := runCLI(t, "spawn", api, "--agent=box", "--cwd=/", "--bundle=default"); status != 1 ||
		!strings.Contains(errOut, "agent_refused") || !strings.Contains(errOut, hint) {
		t.Errorf("spawn on a refused agent: %d %s", status, errOut)
	}

	if status, out, errOut := runCLI(t, "trust", "set", "box", "steer", api); status != 0 || out != "box: steer\n" {
		t.Fatalf("trust set: %d %q %s", status, out, errOut)
	}
	awaitAgentState(t, c, "box", "established")
	_, out, _ = runCLI(t, "doctor", api)
	if !hasCheck(out, "PASS", "agent box", "connected at 127.0.0.1:") {
		t.Errorf("doctor after trust set:\n%s", out)
	}
	_, out, _ = runCLI(t, "trust", "list", api, "--json")
	var ds []controlapi.TrustDecision
	if err := json.Unmarshal([]byte(out), &ds); err != nil || len(ds) != 1 || ds[0].Machine != "box" || ds[0].Policy != controlapi.PolicySteer {
		t.Errorf("trust list --json: %v %s", err, out)
	}
	_, out, _ = runCLI(t, "status", api, "--json")
	var st controlapi.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Agents) != 2 || st.Agents[0].Name != "box" || st.Agents[0].Machine != "box" {
		t.Errorf("status --json: %v %s", err, out)
	}

	// The fleet's errors arrive typed.
	if err := c.Stop(context.Background(), "i-nope"); !errors.Is(err, controlapi.ErrUnknownInstance) {
		t.Errorf("stop of an unknown instance: %v", err)
	}
	if _, err := c.Reject(context.Background(), "t-nope", "x"); !errors.Is(err, controlapi.ErrUnknownTask) {
		t.Errorf("reject of an unknown task: %v", err)
	}
	if _, err := c.Spawn(context.Background(), controlapi.SpawnRequest{Agent: "gone", Cwd: dir, Bundle: "default"}, nil); !errors.Is(err, controlapi.ErrNotConnected) {
		t.Errorf("spawn on an unreachable agent: %v", err)
	}
	if _, err := c.Spawn(context.Background(), controlapi.SpawnRequest{Agent: "box", Cwd: dir, Bundle: "missing"}, nil); !errors.Is(err, controlapi.ErrUnknownBundle) {
		t.Errorf("spawn of a missing bundle: %v", err)
	}
	if err := c.UIAnswer(context.Background(), "ui-nope", json.RawMessage(`true`)); !errors.Is(err, controlapi.ErrUnknownUIRequest) {
		t.Errorf("answer to an unknown dialog: %v", err)
	}

	// A second server on the same state directory is refused before it
	// touches anything.
	second := *cmd
	if err := second.serve(context.Background(), zerolog.Nop(), nil); err == nil || !strings.Contains(err.Error(), "already listens") {
		t.Errorf("second serve: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cmd.StateDir, controlapi.TokenName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unix mode wrote a token file: %v", err)
	}
}

// hasCheck reports whether doctor's output has a line for check name with
// result whose detail starts with detail.
func hasCheck(out, result, name, detail string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, result+" ")
		if !ok {
			continue
		}
		if rest, ok = strings.CutPrefix(strings.TrimLeft(rest, " "), name+" "); ok && strings.HasPrefix(strings.TrimLeft(rest, " "), detail) {
			return true
		}
	}
	return false
}

// startServe runs cmd.serve until the test ends and returns what it
// serves and a client of its control API. The server stops (and must
// stop cleanly) before the cleanups registered earlier run: the agents
// it talks to outlive it.
func startServe(t *testing.T, cmd *ServeCmd) (served, *controlapi.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan served, 1)
	done := make(chan error, 1)
	go func() { done <- cmd.serve(ctx, zerolog.Nop(), func(s served) { ready <- s }) }()
	var s served
	select {
	case s = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	c, err := controlapi.NewClient(s.API)
	if err != nil {
		cancel()
		<-done
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s, c
}

// serve --trust admits a machine before it ever connects: a headless
// server needs no terminal for first contact.
func TestServeTrustFlag(t *testing.T) {
	dir := socketDir(t)
	cmd := &ServeCmd{
		StateDir:    filepath.Join(dir, "state"),
		Registry:    filepath.Join(dir, "registry"),
		Listen:      "127.0.0.1:0",
		Agent:       []string{"box=" + startAgent(t)},
		WhoisStatic: []string{"127.0.0.1=box"},
		Trust:       []string{"box=steer", "other=deny"},
	}
	s, c := startServe(t, cmd)
	awaitAgentState(t, c, "box", "established")
	_, out, _ := runCLI(t, "trust", "list", "--api="+s.API.String())
	if !strings.Contains(out, "box") || !strings.Contains(out, "other") || !strings.Contains(out, "deny") {
		t.Errorf("trust list after --trust:\n%s", out)
	}
	for _, bad := range []string{"box", "=steer", "box=maybe"} {
		if _, err := parseTrust([]string{bad}); err == nil {
			t.Errorf("--trust %q accepted", bad)
		}
	}
}
