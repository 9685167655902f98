package fleet_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// logWatch is a zerolog writer that closes seen at the first line holding
// want.
type logWatch struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *logWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// A restarted server reconciles a worker whose task finished while no
// server was up (the pifleet-server kill -9 scenario of
// TestServerKill9WhileATaskFinishes). Its get_state is still out when the
// task_done moves the instance to review, and the application accepts
// with stop; the snapshot then arrives while the instance is stopping. It
// describes the instance as it was when asked (unreachable): applied to
// stopping, it sent the stop a second time.
func TestReconcileDoesNotApplyASnapshotToAnInstanceThatMovedOn(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	peer.holdRuns()
	task, err := inst.Submit(t.Context(), "long job", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nextFrame[*transport.RPCFrame](t, peer) // the run started
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}

	peer.mu.Lock()
	peer.holdGetState = true
	peer.mu.Unlock()
	skipped := &logWatch{want: "snapshot not applied", seen: make(chan struct{})}
	tf2 := tf.startAgain(t, fleet.WithLogger(zerolog.New(skipped).Level(zerolog.DebugLevel)))
	select {
	case <-peer.getStateHeld:
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted server never asked for the worker's state")
	}
	drainFrames(peer)
	peer.releaseHeld() // the task_done reaches the new server
	tf2.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)

	// The peer answers the get_state once the stop is out, and keeps the
	// stopped answer until the snapshot was dealt with.
	answers := make(chan func(), 4)
	peer.mu.Lock()
	peer.stopGate = func(send func()) {
		peer.releaseGetState()
		answers <- send
	}
	peer.mu.Unlock()
	task2, err := tf2.Task(task.ID())
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() { accepted <- task2.Accept(t.Context(), transport.DispositionStop) }()
	var send func()
	select {
	case send = <-answers:
	case <-time.After(10 * time.Second):
		t.Fatal("no task_accept with stop reached the peer")
	}
	select {
	case <-skipped.seen:
	case <-answers:
		t.Fatal("the stale snapshot made the server send a second stop")
	case <-time.After(10 * time.Second):
		t.Fatal("the snapshot was neither applied nor skipped")
	}
	send()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if got := inst2State(t, tf2, inst.ID()); got != fleet.StateStopped {
		t.Errorf("instance after accept with stop: %s, want stopped", got)
	}
	for _, fr := range drainFrames(peer) {
		if _, ok := fr.(*transport.StopFrame); ok {
			t.Errorf("a stop frame was sent besides the task_accept: %+v", fr)
		}
	}
}

func inst2State(t *testing.T, tf *testFleet, id string) fleet.InstanceState {
	t.Helper()
	inst, err := tf.Instance(id)
	if err != nil {
		t.Fatal(err)
	}
	return inst.State()
}
