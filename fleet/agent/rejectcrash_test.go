//go:build unix

package agent

import (
	"os"
	"strings"
	"testing"

	"example.com/pifleet/transport"
)

// Issue #16: an agent and a server that both restart could revise twice.
// The server records a rejection before it sends task_reject and, killed
// before it noted the send, sends it again under the same rejection id
// once restarted; the agent carried an id out once only while it kept it
// in memory. Here the agent is killed (kill -9) while the worker runs the
// revision, and the restarted "server" (a new connection) sends the same
// rejection again: the restarted agent still knows it carried it out, so
// the worker revises once.
func TestRejectionCarriedOutBeforeAnAgentKill9IsNotCarriedOutAgain(t *testing.T) {
	r := startDraft(t)
	c := r.c
	gate := mkfifo(t, r.w.cwd, "gate")
	reject := &transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "bash: cat gate", RejectionID: "t-rej#1"}
	c.send(reject)
	c.nextEvent(r.inst.InstanceID, typeIs("tool_execution_start")) // the worker runs the revision

	d := r.restart(t)
	release(t, gate)
	revised := r.awaitRevision(t, d)
	openGate(t, gate)

	// The restarted server sends its recorded rejection again, then the
	// next one.
	d.send(reject)
	r.rejectAgain(t, d, revised)
	d.roundTrip("l")

	if n := r.revisionPrompts(t, "bash: cat gate"); n != 1 {
		t.Errorf("the worker revised %d times on the first rejection, want once", n)
	}
}

// Issue #16: the rejection's id is stored with the revision's task before
// the revision prompt reaches the worker. An agent killed (kill -9) right
// after that write, before the prompt was handed to the worker's shim, left
// a restarted agent that re-adopted the worker with the run open, found pi
// idle and settled at once with the worker's previous answer: the review
// got the unrevised work, the feedback was never delivered, and a resend of
// the rejection was ignored as carried out. Now the restarted agent
// completes the step: the revision prompt reaches the worker once, and the
// task_done after it carries the revised answer.
func TestAgentKilledBeforeTheRevisionPromptReachedTheWorkerSendsItOnRestart(t *testing.T) {
	r := startDraft(t, EnvSpawnHold+"="+holdRevisionRecorded)
	reject := &transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "say: revised", RejectionID: "t-rej#1"}
	r.c.send(reject)
	r.awaitHeld(t, "the rejection was stored") // the prompt is not sent

	d := r.restart(t)
	d.send(reject) // the restarted server sends its recorded rejection again
	revised := r.awaitRevision(t, d)
	if revised.LastAssistantMessage != "revised" {
		t.Fatalf("the revision's task_done %+v, want the revised answer", revised)
	}
	// The next rejection runs after any second revision would have.
	r.rejectAgain(t, d, revised)

	if n := r.revisionPrompts(t, "say: revised"); n != 1 {
		t.Errorf("the revision prompt reached the worker %d times, want once", n)
	}
}

// The other side of the same step: an agent killed (kill -9) after the
// worker's shim took the revision prompt and before the agent noted so.
// The restarted agent finds the prompt in the worker's session and does
// not send it again; the run settles once, at its end, with the revision.
func TestAgentKilledAfterTheRevisionPromptReachedTheWorkerDoesNotSendItAgain(t *testing.T) {
	r := startDraft(t, EnvSpawnHold+"="+holdRevisionSent)
	gate := mkfifo(t, r.w.cwd, "gate")
	r.c.send(&transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "bash: cat gate", RejectionID: "t-rej#1"})
	r.c.nextEvent(r.inst.InstanceID, typeIs("tool_execution_start")) // the worker runs the revision
	r.awaitHeld(t, "the revision prompt was sent")                   // the shim took it; the agent has not noted it

	d := r.restart(t)
	release(t, gate)
	revised := r.awaitRevision(t, d)
	openGate(t, gate) // a second revision would run through
	r.rejectAgain(t, d, revised)

	if n := r.revisionPrompts(t, "bash: cat gate"); n != 1 {
		t.Errorf("the revision prompt reached the worker %d times, want once", n)
	}
}

// draftRun is an agent process whose worker has answered task t-rej once
// (the draft a rejection revises), and the agent started after it is
// killed (kill -9).
type draftRun struct {
	w     *world
	p     *agentProc // the agent running now
	c     *client    // the connection to p
	inst  transport.InstanceInfo
	draft *transport.TaskDoneFrame // acknowledged
}

// startDraft starts an agent (with env), spawns a worker and runs task
// t-rej to its acknowledged task_done. Every worker is stopped, through
// the agent then running, when the test ends.
func startDraft(t *testing.T, env ...string) *draftRun {
	t.Helper()
	if testing.Short() {
		t.Skip("starts agent processes")
	}
	w := newWorld(t)
	r := &draftRun{w: w, p: w.startWith(t, env...)}
	t.Cleanup(func() { r.p.kill9(t); w.stopAll(t) })
	r.c = dialAddr(t, r.p.addr, "")
	r.c.hello()
	r.inst = r.c.mustSpawn("s", w.cwd, "default", nil)
	r.c.rpc(r.inst.InstanceID, "t-rej", prompt("p", "say: draft"))
	r.draft = nextOf[*transport.TaskDoneFrame](r.c, nil)
	r.c.ack(r.draft)
	return r
}

// awaitHeld waits until the agent, started with EnvSpawnHold, holds at
// its fault point (what names the step before it).
func (r *draftRun) awaitHeld(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.p.held:
	case <-r.p.done:
		t.Fatalf("the agent exited before %s", what)
	}
}

// restart kills the agent (kill -9), starts it again and returns a new
// connection to it (a restarted server's), its hello done.
func (r *draftRun) restart(t *testing.T) *client {
	t.Helper()
	r.p.kill9(t)
	<-r.c.closed
	r.p = r.w.start(t)
	r.c = dialAddr(t, r.p.addr, "")
	r.c.hello()
	return r.c
}

// awaitRevision waits on d for the settled task_done of t-rej after the
// draft, and acknowledges it.
func (r *draftRun) awaitRevision(t *testing.T, d *client) *transport.TaskDoneFrame {
	t.Helper()
	revised := awaitTaskDone(d, r.draft)
	if revised.TaskID != "t-rej" || revised.Status != transport.TaskSettled {
		t.Fatalf("the revision's task_done %+v", revised)
	}
	d.ack(revised)
	return revised
}

// rejectAgain sends t-rej's next rejection (t-rej#2, answered "third")
// and checks that the task_done after the revision answers it: a second
// run of the first rejection would have answered in between.
func (r *draftRun) rejectAgain(t *testing.T, d *client, revised *transport.TaskDoneFrame) {
	t.Helper()
	d.send(&transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "say: third", RejectionID: "t-rej#2"})
	third := awaitTaskDone(d, r.draft, revised)
	if third.LastAssistantMessage != "third" {
		t.Fatalf("after the revision the worker answered %+v, want the next rejection's answer (a second revision ran in between?)", third)
	}
	d.ack(third)
}

// revisionPrompts counts the revision prompts with that feedback in the
// worker's session file.
func (r *draftRun) revisionPrompts(t *testing.T, feedback string) int {
	t.Helper()
	data, err := os.ReadFile(r.inst.SessionPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), `Revision requested:\n`+feedback)
}

// openGate replaces the fifo gate with an empty file, which no longer
// blocks a tool that reads it.
func openGate(t *testing.T, gate string) {
	t.Helper()
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}
