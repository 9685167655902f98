//go:build linux

package fleet_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/pitest"
)

// A user can stop a worker at any moment of its spawn, with the real
// agent: the agent gives the spawn up (spawn_cancel) and ends whatever it
// had started for it — checked through the process tree — and Spawn's
// caller learns that the spawn was stopped. A Spawn whose context ends
// does the same.
func TestStopDuringTheSpawn(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	tf, ps, stateDir := fleetWithAgent(t, pitest.Scripted, reg, func(c *agent.Config) {
		// A worker whose environment says so tells the test its pid (on
		// the fifo PIFLEET_TEST_HANG names), then never answers: its
		// spawn waits for the first get_state.
		c.PiCommand = append([]string{"/bin/sh", "-c",
			`if [ -n "$PIFLEET_TEST_HANG" ]; then echo $$ > "$PIFLEET_TEST_HANG"; exec sleep 600; fi; exec "$0" "$@"`}, c.PiCommand...)
	})
	down := "http://" + refusedAddr(t)

	// hang starts a spawn whose worker hangs, and returns the spawn's id
	// once the worker process runs, with its shim and worker pids, and
	// Spawn's result to come.
	hang := func(t *testing.T, ctx context.Context, env map[string]string, want fleet.InstanceState) (spawnID string, pids []int, result <-chan error) {
		t.Helper()
		fifo := filepath.Join(t.TempDir(), "up")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		before, err := e2ekit.Shims(stateDir)
		if err != nil {
			t.Fatal(err)
		}
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env["PIFLEET_TEST_HANG"] = fifo
		res := make(chan error, 1)
		go func() {
			_, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain", Env: env})
			res <- err
		}()
		up, err := os.ReadFile(fifo) // once the worker wrote its pid
		if err != nil {
			t.Fatal(err)
		}
		worker, err := strconv.Atoi(strings.TrimSpace(string(up)))
		if err != nil {
			t.Fatalf("worker pid %q: %v", up, err)
		}
		after, err := e2ekit.Shims(stateDir)
		if err != nil {
			t.Fatal(err)
		}
		for id, shim := range after {
			if _, old := before[id]; !old {
				pids = []int{shim, worker}
			}
		}
		if pids == nil {
			t.Fatal("no new shim runs for the spawn")
		}
		for _, i := range tf.Status(t.Context()).Instances {
			if strings.HasPrefix(i.InstanceID, "spawn-") && i.State == want {
				spawnID = i.InstanceID
			}
		}
		if spawnID == "" {
			t.Fatalf("no spawn in state %s: %+v", want, tf.Status(t.Context()).Instances)
		}
		return spawnID, pids, res
	}
	// noneLeft fails unless every pid has ended.
	noneLeft := func(t *testing.T, pids []int) {
		t.Helper()
		for _, pid := range pids {
			if alive(pid) {
				t.Errorf("process %d of the stopped spawn still runs", pid)
			}
		}
		if left, err := e2ekit.Shims(stateDir); err != nil || slices.ContainsFunc(slices.Collect(maps.Values(left)), func(p int) bool { return slices.Contains(pids, p) }) {
			t.Errorf("shims %v (%v) after the stop", left, err)
		}
	}
	stopSpawn := func(t *testing.T, spawnID string, from fleet.InstanceState, pids []int, result <-chan error) {
		t.Helper()
		inst, err := tf.Instance(spawnID)
		if err != nil {
			t.Fatal(err)
		}
		if err := inst.Stop(t.Context()); err != nil {
			t.Fatalf("Stop during %s: %v", from, err)
		}
		if st := inst.State(); st != fleet.StateStopped && st != "" {
			t.Errorf("state after Stop %q, want stopped", st)
		}
		err = <-result
		var se *fleet.SpawnStoppedError
		if !errors.As(err, &se) || !errors.Is(err, fleet.ErrSpawnStopped) || se.SpawnID != spawnID {
			t.Fatalf("Spawn: %v; want a *SpawnStoppedError for %s", err, spawnID)
		}
		noneLeft(t, pids)
	}

	t.Run("stopped while provisioning", func(t *testing.T) {
		sub := tf.Subscribe(256)
		defer sub.Close()
		id, pids, res := hang(t, t.Context(), nil, fleet.StateProvisioning)
		stopSpawn(t, id, fleet.StateProvisioning, pids, res)
		walk := walkOf(sub, id)
		if !slices.Contains(walk, "stopRequested provisioning→stopping") || walk[len(walk)-1] != "stoppedGracefully stopping→stopped" {
			t.Fatalf("walk %v", walk)
		}
	})
	t.Run("stopped while degraded_cache", func(t *testing.T) {
		// The bundle is cached by the spawn above; the registry is down.
		sub := tf.Subscribe(256)
		defer sub.Close()
		id, pids, res := hang(t, t.Context(), map[string]string{"PI_FLEET_SERVER": down}, fleet.StateDegradedCache)
		stopSpawn(t, id, fleet.StateDegradedCache, pids, res)
		if walk := walkOf(sub, id); !slices.Contains(walk, "stopRequested degraded_cache→stopping") {
			t.Fatalf("walk %v", walk)
		}
	})
	t.Run("stopped while the registry does not answer", func(t *testing.T) {
		// A registry that never answers holds the spawn in its sync
		// (requested, spawning or provisioning, as far as its progress
		// reached the server).
		asked := make(chan struct{}, 1)
		stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case asked <- struct{}{}:
			default:
			}
			<-r.Context().Done()
		}))
		t.Cleanup(stall.Close)
		sub := tf.Subscribe(256)
		defer sub.Close()
		res := make(chan error, 1)
		go func() {
			_, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain",
				Env: map[string]string{"PI_FLEET_SERVER": stall.URL}})
			res <- err
		}()
		<-asked
		var id string
		var state fleet.InstanceState
		for _, i := range tf.Status(t.Context()).Instances {
			if strings.HasPrefix(i.InstanceID, "spawn-") {
				id, state = i.InstanceID, i.State
			}
		}
		if id == "" {
			t.Fatal("the spawn is not listed")
		}
		if state != fleet.StateRequested && state != fleet.StateSpawning && state != fleet.StateProvisioning {
			t.Fatalf("a spawn whose registry does not answer is %s", state)
		}
		stopSpawn(t, id, state, nil, res)
		if walk := walkOf(sub, id); !slices.Contains(walk, "stopRequested "+string(state)+"→stopping") ||
			walk[len(walk)-1] != "stoppedGracefully stopping→stopped" {
			t.Fatalf("walk %v", walk)
		}
	})
	t.Run("spawn's context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		sub := tf.Subscribe(256)
		defer sub.Close()
		id, pids, res := hang(t, ctx, nil, fleet.StateProvisioning)
		cancel()
		if err := <-res; !errors.Is(err, context.Canceled) {
			t.Fatalf("Spawn: %v, want context.Canceled", err)
		}
		inst, err := tf.Instance(id)
		if err == nil {
			select {
			case <-inst.Ended():
			case <-time.After(30 * time.Second):
				t.Fatalf("the spawn given up did not end: %s", inst.State())
			}
		}
		noneLeft(t, pids)
		if walk := walkOf(sub, id); !slices.Contains(walk, "stopRequested provisioning→stopping") {
			t.Fatalf("walk %v", walk)
		}
	})
}

// walkOf is the instance's transitions (event from→to) in the changes
// received so far.
func walkOf(sub *fleet.Subscription, id string) []string {
	var walk []string
	for _, c := range drainChanges(sub) {
		if c.Kind == fleet.ChangeInstanceState && c.InstanceID == id {
			walk = append(walk, c.Event+" "+c.From+"→"+c.To)
		}
	}
	return walk
}

// alive reports a process that has not ended (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}
