package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// An SDK call that would ask something of the worker of an ended
// instance is refused with an *InstanceEndedError (ErrInstanceEnded, and
// ErrInvalidState as before; ErrWorkerGone with how it died when its
// worker did), and nothing is sent to the agent for it.
func TestCallsOnAnEndedInstanceAreRefused(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	stopped := spawn(t, tf, "box")
	if err := stopped.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	died := spawn(t, tf, "box")
	peer.send(peer.conn(), &transport.WorkerExitedFrame{InstanceID: died.ID(), Signal: "KILL", State: transport.InstanceExited})
	tf.waitInstance(t, died.ID(), fleet.StateStopped)
	drainFrames(peer)

	calls := map[string]func(context.Context, *fleet.Instance) error{
		"prompt": func(ctx context.Context, i *fleet.Instance) error {
			_, err := i.Prompt(ctx, "hi", fleet.PromptOptions{})
			return err
		},
		"prompt async": func(ctx context.Context, i *fleet.Instance) error {
			_, err := i.PromptAsync(ctx, "hi", fleet.PromptOptions{})
			return err
		},
		"submit": func(ctx context.Context, i *fleet.Instance) error {
			_, err := i.Submit(ctx, "hi", fleet.PromptOptions{})
			return err
		},
		"steer":     func(ctx context.Context, i *fleet.Instance) error { return i.Steer(ctx, "hi") },
		"follow up": func(ctx context.Context, i *fleet.Instance) error { return i.FollowUp(ctx, "hi") },
		"abort":     func(ctx context.Context, i *fleet.Instance) error { return i.Abort(ctx) },
		"stop":      func(ctx context.Context, i *fleet.Instance) error { return i.Stop(ctx) },
		"rpc": func(ctx context.Context, i *fleet.Instance) error {
			_, err := i.RPC(ctx, json.RawMessage(`{"type":"get_state"}`))
			return err
		},
		"set model": func(ctx context.Context, i *fleet.Instance) error { return i.SetModel(ctx, "faux", "faux-1") },
		"set tools": func(ctx context.Context, i *fleet.Instance) error {
			_, err := i.SetTools(ctx, []string{"read"})
			return err
		},
		"pin model": func(ctx context.Context, i *fleet.Instance) error { _, err := i.PinModel(ctx, true); return err },
		"rebundle":  func(ctx context.Context, i *fleet.Instance) error { return i.Rebundle(ctx, "default") },
		"exec": func(ctx context.Context, i *fleet.Instance) error {
			_, err := i.Exec(ctx, fleet.ExecRequest{Argv: []string{"true"}})
			return err
		},
	}
	for _, inst := range []*fleet.Instance{stopped, died} {
		for name, call := range calls {
			err := call(t.Context(), inst)
			var ended *fleet.InstanceEndedError
			if !errors.Is(err, fleet.ErrInstanceEnded) || !errors.Is(err, fleet.ErrInvalidState) || !errors.As(err, &ended) || ended.InstanceID != inst.ID() {
				t.Errorf("%s on ended %s: %v, want an *InstanceEndedError naming it", name, inst.ID(), err)
			}
			if gone := errors.Is(err, fleet.ErrWorkerGone); gone != (inst == died) {
				t.Errorf("%s on ended %s: %v: matches ErrWorkerGone = %v", name, inst.ID(), err, gone)
			}
		}
	}
	for _, fr := range drainFrames(peer) {
		t.Errorf("sent %s for an ended instance: %+v", fr.FrameType(), fr)
	}
}
