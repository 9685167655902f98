//go:build unix

package fleet_test

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/netfault"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// startAgent runs the real agent daemon on loopback with the scripted
// worker, pinned to the server machine "orchestrator"; it returns its
// address and the worker's cwd.
func startAgent(t testing.TB, registryRoot string) (addr, cwd string) {
	t.Helper()
	addr, ps := startAgentOf(t, pitest.Scripted, registryRoot)
	return addr, ps.Dir
}

// startAgentOf is startAgent with workers of either kind (the real pi
// gets the faux provider from its bundle: see publishFaux); it returns the
// worker's command line, whose Dir is the worker's cwd.
func startAgentOf(t testing.TB, kind pitest.Kind, registryRoot string) (addr string, ps pitest.Spec) {
	t.Helper()
	return startAgentWith(t, kind, registryRoot, nil)
}

// startAgentWith is startAgentOf with a last word on the agent's
// configuration.
func startAgentWith(t testing.TB, kind pitest.Kind, registryRoot string, mod func(*agent.Config)) (addr string, ps pitest.Spec) {
	t.Helper()
	ps = pitest.Command(t, kind, pitest.Options{})
	whois, err := identity.ParseStatic("127.0.0.1=orchestrator/ana@example")
	if err != nil {
		t.Fatal(err)
	}
	stateDir, err := os.MkdirTemp("", "pf") // short: shim socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(stateDir) })
	// Registered before the agent's own cleanup, so it runs after it: a
	// test that fails before it stopped its workers leaves none running.
	e2ekit.CleanupWorkers(t, stateDir)
	cfg := agent.Config{
		Machine: "worker-01", Listen: "127.0.0.1:0",
		Pin: trust.Pin{Machine: "orchestrator"}, Whois: whois, ServerKeys: []ed25519.PublicKey{testServerKey},
		StateDir: stateDir, SessionsRoot: filepath.Join(ps.AgentDir, "sessions"), Registry: registryRoot,
		PiCommand: []string{ps.Path}, ShimCommand: []string{os.Args[0], "shim"}, Env: ps.Env,
		StopGrace: 2 * time.Second, SessionsPoll: -1,
	}
	if kind == pitest.RealPi {
		// Offline, and nothing of the machine's own pi configuration.
		cfg.PiArgs = []string{"--offline", "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files"}
		cfg.StopGrace = 10 * time.Second
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- a.Run(ctx) }()
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("agent Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("agent never listened")
	}
	t.Cleanup(func() {
		cancel()
		_ = a.Close()
		<-done
	})
	return a.Addr().String(), ps
}

// The core flow against the real agent daemon and the scripted worker:
// spawn → prompt → settled; task → task_done → reject → revise → accept
// with stop.
func TestEndToEndWithTheAgentDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, cwd := startAgent(t, reg)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)

	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: cwd, Bundle: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	text, err := inst.Prompt(t.Context(), "say: hello from the worker", fleet.PromptOptions{})
	if err != nil || text != "hello from the worker" {
		t.Fatalf("Prompt = %q, %v", text, err)
	}
	task, err := inst.Submit(t.Context(), "say: first draft", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := tf.report(t); r.TaskID != task.ID() || !strings.Contains(r.Summary, "first draft") || r.TraceID == "" {
		t.Fatalf("first report %+v", r)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)
	if esc, err := task.Reject(t.Context(), "say: second draft"); err != nil || esc {
		t.Fatalf("Reject = %v, %v", esc, err)
	}
	if r := tf.report(t); !strings.Contains(r.Summary, "second draft") {
		t.Fatalf("revision report %+v", r)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)
	if err := task.Accept(t.Context(), transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
	if got := inst.State(); got != fleet.StateStopped {
		t.Errorf("after accept stop: %s", got)
	}
}

// AC-2.5 against the real agent: a cut connection makes the instance
// unreachable while the worker keeps running; the reconnect lists it,
// replays what was missed and finds it idle.
func TestEndToEndConnectionCut(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, ps := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) { c.BehindProxy = true })
	cwd := ps.Dir
	proxy, err := netfault.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{proxy.Addr()}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: cwd, Bundle: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	drainChanges(tf.sub)
	proxy.Cut()
	tf.waitChange(t, "unreachable", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.To == string(fleet.StateUnreachable)
	})
	tf.waitChange(t, "reconnected idle", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.Event == string(fleet.EventReconnectedIdle)
	})
	text, err := inst.Prompt(t.Context(), "say: still here", fleet.PromptOptions{})
	if err != nil || text != "still here" {
		t.Fatalf("Prompt after the reconnect = %q, %v", text, err)
	}
	if err := inst.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPromptRoundTripAgent measures Prompt → settled through the
// SDK, the real agent daemon (its shim and settle detection) and the
// scripted worker, all on loopback; it reports the p50 and p99 latency
// besides the mean.
func BenchmarkPromptRoundTripAgent(b *testing.B) {
	defer fleet.SetLockCheck(fleet.SetLockCheck(false)) // the tests' lock check reads the stack at every Lock
	reg := b.TempDir()
	publish(b, reg, "plain", `{}`)
	addr, cwd := startAgent(b, reg)
	tf := startFleet(b, b.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(b, "worker-01", transport.StateEstablished)
	inst, err := tf.Spawn(b.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: cwd, Bundle: "plain"})
	if err != nil {
		b.Fatal(err)
	}
	tf.sub.Close()
	b.ReportAllocs()
	// The hops: when agent_start and agent_end reach the SDK, and when
	// Prompt returns (after the agent's get_state barrier and settle).
	var lat, started, ended []time.Duration
	var start time.Time
	opts := fleet.PromptOptions{OnEvent: func(ev fleet.Event) {
		switch ev.Type {
		case "agent_start":
			started = append(started, time.Since(start))
		case "agent_end":
			ended = append(ended, time.Since(start))
		}
	}}
	for b.Loop() {
		start = time.Now()
		if _, err := inst.Prompt(b.Context(), "say: ok", opts); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, "", lat)
	reportPercentiles(b, "agent_start-", started)
	reportPercentiles(b, "agent_end-", ended)
	if err := inst.Stop(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// reportPercentiles reports the p50 and p99 of a benchmark's latencies,
// their unit prefixed with prefix.
func reportPercentiles(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), prefix+"p50-ns")
	b.ReportMetric(at(0.99), prefix+"p99-ns")
}
