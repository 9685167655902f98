//go:build linux

package fleet_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/netfault"
	"example.com/pifleet/transport"
)

// The spawn application's log lines the tests wait on.
const (
	spawnAppStarted = "spawn app started"
	spawnAppHeld    = "spawned held"
)

func init() { spawnApp = runSpawnApp }

// runSpawnApp embeds a fleet of one agent, spawns one worker of bundle
// "default" and, once the agent's spawned arrives and before anything of
// it is stored, logs spawnAppHeld and stands still until it is killed.
func runSpawnApp(args []string) int {
	fs, af := appFlagSet("spawn-app")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()
	a, err := fleet.ParseAgent(*af.agent)
	if err != nil {
		log.Error().Err(err).Msg("agent")
		return 1
	}
	f, err := fleet.New(af.fleetOptions(a, fleet.WithLogger(log.With().Str("component", "fleet").Logger()))...)
	if err != nil {
		log.Error().Err(err).Msg("new fleet")
		return 1
	}
	fleet.SetSpawnedHold(f, func() {
		log.Info().Msg(spawnAppHeld)
		select {} // until killed
	})
	ctx := context.Background()
	if err := f.Start(ctx); err != nil {
		log.Error().Err(err).Msg("start")
		return 1
	}
	log.Info().Msg(spawnAppStarted)
	if _, err := f.Spawn(ctx, fleet.SpawnOptions{Agent: a.Name, Cwd: *af.cwd, Bundle: "default"}); err != nil {
		log.Error().Err(err).Msg("spawn")
	}
	return 1 // the hold never returns
}

// A server killed (kill -9) after the agent's spawned arrived and before
// it stored the instance left a worker no server knew (#16): the agent
// runs it, the restarted server has no record of it. The spawn is now
// stored before its frame is sent, and the agent lists the worker under
// its spawn id: the restarted server adopts it, and controls it.
func TestServerKilledBeforeStoringASpawnedWorkerAdoptsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end with processes")
	}
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	aw := newAgentWorld(t, "box", "orchestrator", "127.0.0.1=orchestrator/ana@example")
	agentProc := aw.start(t)
	stateDir := shortDir(t, "pfs")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	app := startProc(t, "spawn app", exe, processEnv(os.Environ(), spawnAppEnv+"=1"), spawnAppStarted,
		"--state-dir", stateDir, "--key-file", testKeyFile, "--registry", reg, "--agent", "box="+aw.addr, "--cwd", aw.cwd)
	app.waitLog(t, "the held spawned", func(l logLine) bool { return l.Message == spawnAppHeld })
	app.kill9()

	tf := startFleet(t, stateDir, reg, []fleet.Agent{{Name: "box", Addresses: []string{aw.addr}}})
	var adopted fleet.InstanceStatus
	tf.waitUntil(t, "the spawn's worker adopted", func(s fleet.Status) bool {
		for _, in := range s.Instances {
			if in.Agent == "box" && in.State == fleet.StateIdle {
				adopted = in
				return true
			}
		}
		return false
	})
	if n := len(tf.Status(t.Context()).Instances); n != 1 {
		t.Errorf("%d instances after the restart, want the adopted one", n)
	}
	h, err := tf.Instance(adopted.InstanceID)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := h.Prompt(t.Context(), "say: adopted", fleet.PromptOptions{}); err != nil || out != "adopted" {
		t.Fatalf("prompt of the adopted worker: %q, %v", out, err)
	}
	if err := h.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	agentProc.terminate(t)
}

// The connection closes after the agent listed the new worker but before
// its spawned reached the server (#16): the spawn fails for its caller,
// and the worker ran on, known to no server. The agent's next listing
// names the worker's spawn, which the server gave up: it stops the
// worker. Real agent process, the connection cut (netfault) at the
// point.
func TestSpawnWhoseConnectionClosedBeforeItsAnswerStopsItsWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end with processes")
	}
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	aw := newAgentWorld(t, "box", "orchestrator", "127.0.0.1=orchestrator/ana@example")
	aw.args = append(aw.args, "--behind-proxy")
	aw.env = append(aw.env, "PIFLEET_TEST_SPAWN_HOLD=before-answer")
	agentProc := aw.start(t)
	proxy, err := netfault.Start(aw.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	logged := &logWatch{want: fleet.StrayStopped, seen: make(chan struct{})}
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "box", Addresses: []string{proxy.Addr()}}},
		fleet.WithLogger(zerolog.New(logged)))
	tf.waitAgent(t, "box", transport.StateEstablished)

	spawned := make(chan error, 1)
	go func() {
		_, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: aw.cwd, Bundle: "default"})
		spawned <- err
	}()
	agentProc.waitLog(t, "the spawn held before its answer", func(l logLine) bool {
		return l.Message == "spawn held for a fault-injection test (PIFLEET_TEST_SPAWN_HOLD)"
	})
	proxy.Cut()
	if err := <-spawned; err == nil {
		t.Fatal("the spawn whose answer never came succeeded")
	}
	select {
	case <-logged.seen:
	case <-time.After(procWait):
		t.Fatal("the worker of the given-up spawn was not stopped")
	}
	if st := tf.Status(t.Context()); len(st.Instances) != 0 {
		t.Errorf("instances after the given-up spawn: %+v", st.Instances)
	}
}
