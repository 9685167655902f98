package fleet_test

import (
	"errors"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// A stop during a spawn on an agent that knows no spawn_cancel (the
// TypeScript agent: no progress, spawned once it is done; an older
// pifleet agent: accepted, then nothing for a while) ends the instance all
// the same: stopping at once, the worker stopped as soon as the agent
// answers spawned, and Spawn's caller told the spawn was stopped.
func TestStopDuringASpawnOfAnAgentWithoutSpawnCancel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pifleet bool
		from    fleet.InstanceState
	}{
		{"v1 agent", false, fleet.StateRequested},
		{"older pifleet agent", true, fleet.StateSpawning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := newTestAgentPeer(t, "box", tc.pifleet)
			gated := make(chan func(), 1)
			peer.spawnGate = func(send func()) { gated <- send }
			tf := newTestFleet(t, peer)

			spawned := make(chan error, 1)
			go func() {
				_, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: t.TempDir(), Bundle: "default"})
				spawned <- err
			}()
			send := <-gated // the agent works on the spawn
			if tc.pifleet {
				tf.waitChange(t, "spawning", func(c fleet.Change) bool {
					return c.Kind == fleet.ChangeInstanceState && c.To == string(fleet.StateSpawning)
				})
			}
			var spawnID string
			for _, i := range tf.Status(t.Context()).Instances {
				if i.State == tc.from && strings.HasPrefix(i.InstanceID, "spawn-") {
					spawnID = i.InstanceID
				}
			}
			if spawnID == "" {
				t.Fatalf("the spawn is not listed %s: %+v", tc.from, tf.Status(t.Context()).Instances)
			}
			inst, err := tf.Instance(spawnID)
			if err != nil {
				t.Fatal(err)
			}
			stopped := make(chan error, 1)
			go func() { stopped <- inst.Stop(t.Context()) }()
			tf.waitChange(t, "stopRequested from "+string(tc.from), func(c fleet.Change) bool {
				return c.Kind == fleet.ChangeInstanceState && c.InstanceID == spawnID &&
					c.Event == string(fleet.EventStopRequested) && c.From == string(tc.from)
			})
			send() // the agent is done: spawned
			if err := <-stopped; err != nil {
				t.Fatalf("Stop: %v", err)
			}
			err = <-spawned
			var se *fleet.SpawnStoppedError
			if !errors.As(err, &se) || !errors.Is(err, fleet.ErrSpawnStopped) || se.SpawnID != spawnID {
				t.Fatalf("Spawn: %v; want a *SpawnStoppedError for %s", err, spawnID)
			}
			// The worker the agent started was stopped, by its real id.
			var stopFor string
			for fr := range peer.frames {
				if s, ok := fr.(*transport.StopFrame); ok {
					stopFor = s.InstanceID
					break
				}
			}
			if stopFor == "" || strings.HasPrefix(stopFor, "spawn-") {
				t.Fatalf("stop sent for %q, want the spawned worker's id", stopFor)
			}
			if h, err := tf.Instance(stopFor); err != nil || h.State() != fleet.StateStopped {
				t.Fatalf("instance %s: %v; want stopped", stopFor, err)
			}
		})
	}
}

// Stop refuses nothing it cannot do: on an unknown id it says so.
func TestStopOfAnUnknownSpawnID(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	if _, err := tf.Instance("spawn-000000000000"); !errors.Is(err, fleet.ErrUnknownInstance) {
		t.Fatalf("Instance: %v, want ErrUnknownInstance", err)
	}
}
