package fleet_test

import (
	"errors"
	"fmt"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// A long-lived worker that asks many questions costs the fleet a bounded
// number of remembered dialogs: an answered one is forgotten at once, an
// ended one is kept only among the latest few (so that a late answer to
// it is told why it is too late), and the dialogs still open when the
// instance ends end with it, subscribers told.
func TestEndedDialogsAreForgotten(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	const asked = 200
	for i := range asked {
		id := fmt.Sprintf("u-%d", i)
		peer.askUI(inst.ID(), id, "Go on?")
		peer.send(peer.conn(), &transport.UIEndedFrame{InstanceID: inst.ID(), RequestID: id, Reason: transport.UIEndTimedOut})
	}
	last := fmt.Sprintf("u-%d", asked-1)
	tf.waitChange(t, "the last dialog's end", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeUIEnded && c.UI != nil && c.UI.RequestID == last
	})
	if n := fleet.DialogsKept(tf.Fleet, inst.ID()); n > fleet.MaxEndedDialogs {
		t.Errorf("%d dialogs kept after %d ended, want at most %d", n, asked, fleet.MaxEndedDialogs)
	}
	if err := tf.AnswerUI(t.Context(), inst.ID(), last, true); !errors.Is(err, fleet.ErrUIRequestExpired) {
		t.Errorf("late answer of the latest ended dialog: %v, want ErrUIRequestExpired", err)
	}
	if err := tf.AnswerUI(t.Context(), inst.ID(), "u-0", true); !errors.Is(err, fleet.ErrUnknownUIRequest) {
		t.Errorf("late answer of the first ended dialog: %v, want ErrUnknownUIRequest (forgotten)", err)
	}

	peer.askUI(inst.ID(), "u-open", "Still there?")
	tf.waitChange(t, "the open dialog", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeUIRequest && c.UI != nil && c.UI.RequestID == "u-open"
	})
	if err := inst.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	tf.waitChange(t, "the open dialog's end with its instance", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeUIEnded && c.UI != nil && c.UI.RequestID == "u-open"
	})
	if n := fleet.DialogsKept(tf.Fleet, inst.ID()); n != 0 {
		t.Errorf("%d dialogs kept by an ended instance", n)
	}
}
