package fleet_test

import (
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
)

// TestAHalfDoneVerdictIsFinishedAtRestart (#16 defect 5): a server
// killed in the middle of Accept used to leave the instance accepted
// forever (four writes, nothing finished them). The verdict is one
// transaction now (the transcripts in testdata/core show its one persist);
// a state file that an older server left half done — instance and task
// accepted, the disposition stored — is finished by the next start:
// keep_idle makes the worker idle again, stop stops it once its agent is
// back.
func TestAHalfDoneVerdictIsFinishedAtRestart(t *testing.T) {
	for _, disposition := range []transport.Disposition{transport.DispositionKeepIdle, transport.DispositionStop} {
		t.Run(string(disposition), func(t *testing.T) {
			peer := newTestAgentPeer(t, "box", true)
			tf := newTestFleet(t, peer)
			inst := spawn(t, tf, "box")
			task, _ := submitAndFinish(t, tf, inst, "work")
			if err := tf.Close(); err != nil {
				t.Fatal(err)
			}

			// What the old server wrote before it was killed: the
			// instance and the task accepted, the disposition not carried
			// out.
			rewriteStored(t, tf.stateDir, task.ID(), inst.ID(), func(tr *serverstore.Task) {
				tr.State, tr.Verdict, tr.Disposition = string(fleet.TaskAccepted), "accepted by application", string(disposition)
			}, fleet.StateAccepted)

			tf2 := tf.startAgain(t)
			tf2.waitAgent(t, "box", transport.StateEstablished)
			want := fleet.StateIdle
			if disposition == transport.DispositionStop {
				want = fleet.StateStopped
			}
			tf2.waitInstance(t, inst.ID(), want)
			if got := tf2.Tasks(); len(got) != 1 || got[0].State != fleet.TaskEnded {
				t.Errorf("task after restart: %+v, want ended", got)
			}
			if disposition == transport.DispositionKeepIdle {
				inst2, err := tf2.Instance(inst.ID())
				if err != nil {
					t.Fatal(err)
				}
				if _, r := submitAndFinish(t, tf2, inst2, "next"); r.InstanceID != inst.ID() {
					t.Errorf("report %+v", r)
				}
			}
		})
	}
}
