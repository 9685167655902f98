package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/netfault"
	"example.com/pifleet/transport"
)

// queueFullFleet is a fleet whose connection to agent "box" goes through
// a proxy that can stop passing the fleet's bytes on, with a short send
// queue, so that a test can fill the queue.
func queueFullFleet(t *testing.T) (*testFleet, *testAgentPeer, *netfault.Proxy) {
	t.Helper()
	tf, peer, proxy := proxiedFleet(t, fleet.WithConnOptions(transport.Options{SendQueue: 4}))
	return tf, peer, proxy
}

// fillSendQueue stalls the fleet → agent direction and steers inst with
// large messages until the fleet's send queue to the agent is full, which
// a steer under a cancelled context reports with the context's error.
func fillSendQueue(t *testing.T, proxy *netfault.Proxy, inst *fleet.Instance) {
	t.Helper()
	proxy.Stall(netfault.Upstream)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	big := strings.Repeat("x", 1<<19)
	// The socket buffers between the fleet and the stalled proxy hold a
	// few MiB on loopback; the queue holds four frames more.
	for range 512 {
		err := inst.Steer(cancelled, big)
		if errors.Is(err, context.Canceled) {
			return
		}
		if err != nil {
			t.Fatalf("steer while filling the queue: %v", err)
		}
	}
	t.Fatal("the send queue never filled")
}

func instanceState(t *testing.T, tf *testFleet, id string) fleet.InstanceState {
	t.Helper()
	for _, i := range tf.Status(t.Context()).Instances {
		if i.InstanceID == id {
			return i.State
		}
	}
	t.Fatalf("instance %s not in the status", id)
	return ""
}

// Every SDK call that queues a frame for an agent honours its context
// while the agent's send queue is full: under a cancelled context it
// returns the context's error and changes nothing (#15); under a live one
// it waits and succeeds once the queue drains.
func TestSDKCallsWaitForRoomInAFullSendQueueUnderTheirContext(t *testing.T) {
	tf, peer, proxy := queueFullFleet(t)
	idle := spawn(t, tf, "box")
	busy := spawn(t, tf, "box")
	reviewed := spawn(t, tf, "box")
	task, _ := submitAndFinish(t, tf, reviewed, "write the docs")
	if err := task.StartReview(t.Context()); err != nil {
		t.Fatal(err)
	}
	peer.holdRuns()
	if _, err := busy.PromptAsync(t.Context(), "work", fleet.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	tf.waitInstance(t, busy.ID(), fleet.StateRunning)
	peer.askUI(busy.ID(), "u1", "Delete the branch?")
	tf.waitChange(t, "ui request", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeUIRequest && c.UI != nil && c.UI.RequestID == "u1"
	})

	fillSendQueue(t, proxy, busy)

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"PromptAsync", func(ctx context.Context) error {
			_, err := idle.PromptAsync(ctx, "more", fleet.PromptOptions{})
			return err
		}},
		{"Steer", func(ctx context.Context) error { return busy.Steer(ctx, "left") }},
		{"FollowUp", func(ctx context.Context) error { return busy.FollowUp(ctx, "then right") }},
		{"AnswerUI", func(ctx context.Context) error { return tf.AnswerUI(ctx, busy.ID(), "u1", false) }},
		{"Abort", func(ctx context.Context) error { return busy.Abort(ctx) }},
		{"Reject", func(ctx context.Context) error {
			_, err := task.Reject(ctx, "add a test")
			return err
		}},
		{"Accept", func(ctx context.Context) error { return task.Accept(ctx, transport.DispositionKeepIdle) }},
		{"GetState", func(ctx context.Context) error {
			_, err := idle.GetState(ctx)
			return err
		}},
		{"Stop", func(ctx context.Context) error { return idle.Stop(ctx) }},
	}
	for _, c := range calls {
		if err := c.call(cancelled); !errors.Is(err, context.Canceled) {
			t.Errorf("%s on a full queue under a cancelled context: %v, want context.Canceled", c.name, err)
		} else if !strings.Contains(err.Error(), "send queue") {
			t.Errorf("%s: error %q does not say what it waited for", c.name, err)
		}
	}
	// Nothing changed.
	for id, want := range map[string]fleet.InstanceState{idle.ID(): fleet.StateIdle, busy.ID(): fleet.StateRunning,
		reviewed.ID(): fleet.StateVerifying} {
		if got := instanceState(t, tf, id); got != want {
			t.Errorf("instance %s is %s after the refused calls, want %s", id, got, want)
		}
	}
	if info := task.Info(); info.Rejects != 0 || len(info.Feedback) != 0 || info.Verdict != "" {
		t.Errorf("task after the refused verdicts: %+v", info)
	}

	// Under a live context the same calls wait for the queue to drain.
	type result struct {
		name string
		err  error
	}
	results := make(chan result)
	waiting := []struct {
		name string
		call func(context.Context) error
	}{calls[0], calls[3], calls[4], calls[5]} // PromptAsync, AnswerUI, Abort, Reject
	for _, c := range waiting {
		go func() { results <- result{c.name, c.call(t.Context())} }()
	}
	proxy.Resume()
	for range waiting {
		r := <-results
		if r.err != nil {
			t.Errorf("%s once the queue drained: %v", r.name, r.err)
		}
	}
	if rej := nextFrame[*transport.TaskRejectFrame](t, peer); rej.TaskID != task.ID() || rej.Feedback != "add a test" {
		t.Errorf("task_reject %+v", rej)
	}
	if info := task.Info(); info.Rejects != 1 || len(info.Feedback) != 1 || !info.Feedback[0].Delivered {
		t.Errorf("task after the rejection: %+v", info)
	}
	tf.waitInstance(t, busy.ID(), fleet.StateIdle) // aborted
}

// A rejection whose record waited for the disk while the agent's send
// queue filled waits for room once the record is durable, as long as its
// context allows, instead of leaving its frame to the next reconnect of a
// connection that is alive.
func TestARejectionWaitsForRoomAfterItsRecord(t *testing.T) {
	tf, peer, proxy := queueFullFleet(t)
	busy := spawn(t, tf, "box")
	reviewed := spawn(t, tf, "box")
	task, _ := submitAndFinish(t, tf, reviewed, "write the docs")
	peer.holdRuns()
	if _, err := busy.PromptAsync(t.Context(), "work", fleet.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	tf.waitInstance(t, busy.ID(), fleet.StateRunning)

	queued := tf.PersistQueued(t)
	release := tf.HoldWrites(t)
	rejected := make(chan error, 1)
	go func() {
		_, err := task.Reject(t.Context(), "add a test")
		rejected <- err
	}()
	waitQueued(t, queued, "task ") // the rejection's record waits for the disk
	fillSendQueue(t, proxy, busy)
	release()
	proxy.Resume()
	if err := <-rejected; err != nil {
		t.Fatal(err)
	}
	if rej := nextFrame[*transport.TaskRejectFrame](t, peer); rej.TaskID != task.ID() || rej.Feedback != "add a test" {
		t.Errorf("task_reject %+v", rej)
	}
}
