//go:build unix

package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet"
)

// A dialog that ends without an answer is dropped at once, and everybody
// watching is told (issue 19, "a dialog that pi already resolved by its
// own timeout disappears"): the real agent reports its end (ui_ended), the
// fleet publishes ChangeUIEnded, the dialog leaves the pending ones, and
// an answer to it says why it is too late. The fleet's clock stands
// still, so its own reckoning of the dialog's deadline never drops it:
// only the agent's word does. With the scripted worker and with the real
// pi, through the faux /faux-ui command with a timeout.
func TestADialogThatTimesOutIsDroppedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for name, kind := range workerKinds {
		t.Run(name, func(t *testing.T) {
			reg, bundle := registryFor(t, kind)
			frozen := time.Now()
			tf, ps, _ := fleetWithAgent(t, kind, reg, nil, fleet.WithClock(func() time.Time { return frozen }))
			inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: bundle})
			if err != nil {
				t.Fatal(err)
			}
			run, err := inst.PromptAsync(t.Context(), "/faux-ui 300", fleet.PromptOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var asked, ended fleet.Change
			tf.waitChange(t, "the dialog", func(c fleet.Change) bool {
				asked = c
				return c.Kind == fleet.ChangeUIRequest && c.InstanceID == inst.ID()
			})
			tf.waitChange(t, "the dialog's end", func(c fleet.Change) bool {
				ended = c
				return c.Kind == fleet.ChangeUIEnded && c.InstanceID == inst.ID()
			})
			if ended.UI == nil || ended.UI.RequestID != asked.UI.RequestID || ended.UI.Title != asked.UI.Title {
				t.Fatalf("ended %+v, want the dialog asked %+v", ended.UI, asked.UI)
			}
			if !strings.Contains(ended.Message, "time ran out") {
				t.Errorf("the end says %q, want that its time ran out", ended.Message)
			}
			for _, is := range tf.Status(t.Context()).Instances {
				if is.InstanceID == inst.ID() && len(is.PendingUI) != 0 {
					t.Errorf("still pending after its end: %+v", is.PendingUI)
				}
			}
			err = tf.AnswerUI(t.Context(), "", asked.UI.RequestID, true)
			if !errors.Is(err, fleet.ErrUIRequestExpired) || !strings.Contains(err.Error(), "time ran out") {
				t.Errorf("answer after its end: %v, want ErrUIRequestExpired saying its time ran out", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), settleWithin)
			defer cancel()
			if _, err := run.Wait(ctx); err != nil {
				t.Errorf("the command's prompt: %v", err)
			}
			if err := inst.Stop(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
