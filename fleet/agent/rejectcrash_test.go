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
	if testing.Short() {
		t.Skip("starts agent processes")
	}
	w := newWorld(t)
	p := w.start(t)
	defer func() { p.kill9(t); w.stopAll(t) }()
	c := dialAddr(t, p.addr, "")
	c.hello()
	inst := c.mustSpawn("s", w.cwd, "default", nil)
	c.rpc(inst.InstanceID, "t-rej", prompt("p", "say: draft"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	c.ack(td)

	gate := mkfifo(t, w.cwd, "gate")
	reject := &transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "bash: cat gate", RejectionID: "t-rej#1"}
	c.send(reject)
	c.nextEvent(inst.InstanceID, typeIs("tool_execution_start")) // the worker runs the revision
	p.kill9(t)
	<-c.closed

	p = w.start(t)
	d := dialAddr(t, p.addr, "")
	d.hello()
	release(t, gate)
	revised := nextOf[*transport.TaskDoneFrame](d, func(f *transport.TaskDoneFrame) bool { return f.Seq != td.Seq })
	if revised.TaskID != "t-rej" || revised.Status != transport.TaskSettled {
		t.Fatalf("the revision's task_done %+v", revised)
	}
	d.ack(revised)
	// A gate that no longer blocks: a second revision would run through.
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// The restarted server sends its recorded rejection again, then the
	// next one.
	d.send(reject)
	d.send(&transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "say: third", RejectionID: "t-rej#2"})
	third := nextOf[*transport.TaskDoneFrame](d, func(f *transport.TaskDoneFrame) bool {
		return f.Seq != td.Seq && f.Seq != revised.Seq
	})
	if third.LastAssistantMessage != "third" {
		t.Fatalf("after the resent rejection the worker revised again: %+v", third)
	}
	d.ack(third)
	d.roundTrip("l")

	data, err := os.ReadFile(inst.SessionPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `Revision requested:\nbash: cat gate`); n != 1 {
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
	if testing.Short() {
		t.Skip("starts agent processes")
	}
	w := newWorld(t)
	p := w.startWith(t, EnvSpawnHold+"="+holdRevisionRecorded)
	defer func() { p.kill9(t); w.stopAll(t) }()
	c := dialAddr(t, p.addr, "")
	c.hello()
	inst := c.mustSpawn("s", w.cwd, "default", nil)
	c.rpc(inst.InstanceID, "t-rej", prompt("p", "say: draft"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	c.ack(td)

	reject := &transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "say: revised", RejectionID: "t-rej#1"}
	c.send(reject)
	select {
	case <-p.held: // the rejection is stored; the prompt is not sent
	case <-p.done:
		t.Fatal("the agent exited before the rejection was stored")
	}
	p.kill9(t)
	<-c.closed

	p = w.start(t)
	d := dialAddr(t, p.addr, "")
	d.hello()
	d.send(reject) // the restarted server sends its recorded rejection again
	revised := nextOf[*transport.TaskDoneFrame](d, func(f *transport.TaskDoneFrame) bool { return f.Seq != td.Seq })
	if revised.TaskID != "t-rej" || revised.Status != transport.TaskSettled || revised.LastAssistantMessage != "revised" {
		t.Fatalf("the revision's task_done %+v, want the revised answer", revised)
	}
	d.ack(revised)
	// The next rejection runs after any second revision would have.
	d.send(&transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "say: third", RejectionID: "t-rej#2"})
	third := nextOf[*transport.TaskDoneFrame](d, func(f *transport.TaskDoneFrame) bool {
		return f.Seq != td.Seq && f.Seq != revised.Seq
	})
	if third.LastAssistantMessage != "third" {
		t.Fatalf("after the revision: %+v", third)
	}
	d.ack(third)

	data, err := os.ReadFile(inst.SessionPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `Revision requested:\nsay: revised`); n != 1 {
		t.Errorf("the revision prompt reached the worker %d times, want once", n)
	}
}

// The other side of the same step: an agent killed (kill -9) after the
// worker's shim took the revision prompt and before the agent noted so.
// The restarted agent finds the prompt in the worker's session and does
// not send it again; the run settles once, at its end, with the revision.
func TestAgentKilledAfterTheRevisionPromptReachedTheWorkerDoesNotSendItAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agent processes")
	}
	w := newWorld(t)
	p := w.startWith(t, EnvSpawnHold+"="+holdRevisionSent)
	defer func() { p.kill9(t); w.stopAll(t) }()
	c := dialAddr(t, p.addr, "")
	c.hello()
	inst := c.mustSpawn("s", w.cwd, "default", nil)
	c.rpc(inst.InstanceID, "t-rej", prompt("p", "say: draft"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	c.ack(td)

	gate := mkfifo(t, w.cwd, "gate")
	c.send(&transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "bash: cat gate", RejectionID: "t-rej#1"})
	c.nextEvent(inst.InstanceID, typeIs("tool_execution_start")) // the worker runs the revision
	select {
	case <-p.held: // the shim took the prompt; the agent has not noted it
	case <-p.done:
		t.Fatal("the agent exited before the revision prompt was sent")
	}
	p.kill9(t)
	<-c.closed

	p = w.start(t)
	d := dialAddr(t, p.addr, "")
	d.hello()
	release(t, gate)
	revised := nextOf[*transport.TaskDoneFrame](d, func(f *transport.TaskDoneFrame) bool { return f.Seq != td.Seq })
	if revised.TaskID != "t-rej" || revised.Status != transport.TaskSettled {
		t.Fatalf("the revision's task_done %+v", revised)
	}
	d.ack(revised)
	if err := os.Remove(gate); err != nil { // a second revision would run through
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d.send(&transport.TaskRejectFrame{TaskID: "t-rej", Feedback: "say: third", RejectionID: "t-rej#2"})
	third := nextOf[*transport.TaskDoneFrame](d, func(f *transport.TaskDoneFrame) bool {
		return f.Seq != td.Seq && f.Seq != revised.Seq
	})
	if third.LastAssistantMessage != "third" {
		t.Fatalf("after the revision: %+v", third)
	}
	d.ack(third)

	data, err := os.ReadFile(inst.SessionPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), `Revision requested:\nbash: cat gate`); n != 1 {
		t.Errorf("the revision prompt reached the worker %d times, want once", n)
	}
}
