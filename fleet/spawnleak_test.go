package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// A spawn its caller cancelled is stopping until the agent answers. When
// the connection is lost before that answer, the agent gives the spawn up
// with it: the instance ends then (it stayed stopping, listed by Status,
// for ever), and a worker the agent had started all the same is stopped
// at the reconnect's listing.
func TestCancelledSpawnWhoseConnectionIsLostBeforeItsAnswerEnds(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true, func(p *testAgentPeer) {
		p.caps = []string{transport.CapabilitySpawnCancel, transport.CapabilitySpawnID}
	})
	spawnSeen := make(chan string, 1)
	cancelSeen := make(chan struct{}, 1)
	// The agent started the worker and answers neither the spawn nor its
	// cancel before the connection is lost.
	peer.script = func(c *transport.Conn, fr transport.Frame, _ func(transport.Frame)) bool {
		switch fr := fr.(type) {
		case *transport.SpawnFrame:
			peer.mu.Lock()
			peer.nextID++
			id := fmt.Sprintf("i-box-%d", peer.nextID)
			peer.instances[id] = &peerInstance{info: transport.InstanceInfo{InstanceID: id, SpawnID: fr.ID,
				Cwd: fr.Cwd, Bundle: fr.Bundle, State: transport.InstanceRunning}}
			peer.order = append(peer.order, id)
			peer.mu.Unlock()
			peer.send(c, &transport.SpawnProgressFrame{SpawnID: fr.ID, Phase: transport.SpawnAccepted, Bundle: fr.Bundle})
			spawnSeen <- id
			return true
		case *transport.SpawnCancelFrame:
			cancelSeen <- struct{}{}
			return true
		}
		return false
	}
	tf := newTestFleet(t, peer)

	ctx, cancel := context.WithCancel(t.Context())
	spawned := make(chan error, 1)
	go func() {
		_, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: "box", Cwd: t.TempDir(), Bundle: "default"})
		spawned <- err
	}()
	worker := <-spawnSeen
	cancel()
	if err := <-spawned; !errors.Is(err, context.Canceled) {
		t.Fatalf("Spawn: %v, want the caller's context.Canceled", err)
	}
	<-cancelSeen
	var spawnID string
	for _, i := range tf.Status(t.Context()).Instances {
		if i.State == fleet.StateStopping {
			spawnID = i.InstanceID
		}
	}
	if spawnID == "" {
		t.Fatalf("the cancelled spawn is not listed stopping: %+v", tf.Status(t.Context()).Instances)
	}

	peer.conn().Close() // before any answer
	tf.waitAgent(t, "box", transport.StateEstablished)
	// The reconnect's listing names the worker of the spawn this server
	// gave up: it is stopped. Its stop comes after the lost connection
	// was handled.
	if s := nextFrame[*transport.StopFrame](t, peer); s.InstanceID != worker {
		t.Fatalf("stop sent for %q, want the given-up spawn's worker %s", s.InstanceID, worker)
	}
	for _, i := range tf.Status(t.Context()).Instances {
		if i.InstanceID == spawnID || i.InstanceID == worker {
			t.Errorf("after the lost connection, Status lists %s %s; want it ended", i.InstanceID, i.State)
		}
	}
	if h, err := tf.Instance(spawnID); err == nil && !fleet.InstanceTable.IsFinal(h.State()) {
		t.Errorf("the cancelled spawn %s is %s after its connection was lost; want it ended", spawnID, h.State())
	}
}
