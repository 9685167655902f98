//go:build unix

package agent

import (
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/transport"
)

func (h *harness) waitTaskStored() {
	h.t.Helper()
	select {
	case <-h.taskDone:
	case <-time.After(waitLimit):
		h.t.Fatal("no task_done stored")
	}
}

func (h *harness) pending() []agentstore.Entry {
	h.t.Helper()
	p, err := h.a.store.Pending()
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// Items 78 and 79: a tracked prompt produces exactly one task_done with
// its taskId (after the agent's own agent_settled event); the ack empties
// the outbox; an untracked prompt produces none.
func TestTrackedAndUntracked_78_79(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)

	c.rpc(inst.InstanceID, "", prompt("p0", "say: untracked"))
	c.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	c.roundTrip("l0")
	for _, f := range c.seen {
		if _, ok := f.(*transport.TaskDoneFrame); ok {
			t.Fatal("79: an untracked prompt produced a task_done")
		}
	}

	c.rpc(inst.InstanceID, "t-1", prompt("p1", "say: all done"))
	c.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.TaskID != "t-1" || td.InstanceID != inst.InstanceID || td.Status != transport.TaskSettled {
		t.Fatalf("task_done = %+v", td)
	}
	if td.Summary != "all done" || td.LastAssistantMessage != "all done" || td.Stats == nil || *td.Stats.Turns < 1 {
		t.Errorf("task_done content = %+v stats %+v", td, td.Stats)
	}
	c.ack(td)
	c.roundTrip("l1")
	if p := h.pending(); len(p) != 0 {
		t.Fatalf("outbox after ack: %d entries", len(p))
	}
	for _, f := range c.seen {
		if d, ok := f.(*transport.TaskDoneFrame); ok && d != td {
			t.Fatalf("78: second task_done %+v", d)
		}
	}
}

// Item 80 (AC-3.5/3.6): the server disconnects before the worker settles;
// the task_done waits in the outbox, reaches the next connection exactly
// once, and the ack drains it.
func TestOutboxAcrossReconnect_80(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.OutboxRetryMin = time.Hour }})
	fifo := mkfifo(t, h.cwd, "gate")
	a := h.dial(t)
	a.hello()
	inst := a.mustSpawn("s", h.cwd, "default", nil)
	a.rpc(inst.InstanceID, "t-80", prompt("p", "bash: cat gate"))
	a.nextEvent(inst.InstanceID, typeIs("tool_execution_start"))
	a.close()
	release(t, fifo)
	h.waitTaskStored()
	if p := h.pending(); len(p) != 1 || p[0].Frame.TaskID != "t-80" {
		t.Fatalf("outbox = %+v", p)
	}
	b := h.dial(t)
	b.hello()
	td := nextOf[*transport.TaskDoneFrame](b, nil)
	if td.TaskID != "t-80" || td.Status != transport.TaskSettled {
		t.Fatalf("replayed %+v", td)
	}
	b.ack(td)
	b.roundTrip("l")
	if p := h.pending(); len(p) != 0 {
		t.Fatalf("outbox after ack: %+v", p)
	}
	for _, f := range b.seen {
		if d, ok := f.(*transport.TaskDoneFrame); ok && d != td {
			t.Fatalf("delivered twice: %+v", d)
		}
	}
	// A third connection gets nothing: the acked entry is never resent.
	c := h.dial(t)
	c.hello()
	c.roundTrip("l")
	for _, f := range c.seen {
		if _, ok := f.(*transport.TaskDoneFrame); ok {
			t.Fatal("an acked task_done was delivered again")
		}
	}
}

// The outbox re-sends an unacked task_done on its retry schedule, not only
// on reconnect; the ack stops it.
func TestOutboxRetry(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) {
		c.OutboxRetryMin, c.OutboxRetryMax = 30*time.Millisecond, 30*time.Millisecond
	}})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	c.rpc(inst.InstanceID, "t-r", prompt("p", "say: x"))
	first := nextOf[*transport.TaskDoneFrame](c, nil)
	again := nextOf[*transport.TaskDoneFrame](c, nil)
	if again.TaskID != first.TaskID || again.Seq != first.Seq {
		t.Fatalf("retry sent %+v, want the same report %+v", again, first)
	}
	c.ack(again)
	c.roundTrip("l")
	if p := h.pending(); len(p) != 0 {
		t.Fatalf("outbox after ack: %+v", p)
	}
}

// Item 81 (AC-3.12): two $2 messages against a $3 budget abort the run and
// the task ends budget_exceeded.
func TestBudget_81(t *testing.T) {
	h := newHarness(t, hopts{env: []string{"PIFLEET_FAUX_COST=2"}})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", func(f *transport.SpawnFrame) {
		f.Budget = &transport.Budget{MaxCost: new(3.0)}
	})
	c.rpc(inst.InstanceID, "t-b", prompt("p", "bash: echo one\nbash: echo two"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.Status != transport.TaskBudgetExceeded {
		t.Fatalf("status %s, want budget_exceeded (%+v)", td.Status, td)
	}
}

// AC-3.12 from the spawn frame: maxTurns (a pifleet addition to
// spawn.budget) allows one turn; a prompt with a tool call needs two. The
// spawn's limit also overrides the manifest's, which has none here.
func TestSpawnBudgetMaxTurns(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", func(f *transport.SpawnFrame) {
		f.Budget = &transport.Budget{MaxTurns: new(1.0)}
	})
	c.rpc(inst.InstanceID, "t-turns", prompt("p", "bash: echo one"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.Status != transport.TaskBudgetExceeded || !strings.Contains(td.Summary, "maxTurns") {
		t.Fatalf("task_done %+v, want budget_exceeded naming maxTurns", td)
	}
}

// Item 82: a worker that crashes mid-task yields an aborted task_done
// carrying the tail of its stderr.
func TestCrashAborts_82(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.PiCommand = []string{c.ShimCommand[0], "crasher"} }})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "plain", nil)
	c.rpc(inst.InstanceID, "t-c", prompt("p", "anything"))
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.Status != transport.TaskAborted || !contains(td.Summary, "boom: the worker crashed") {
		t.Fatalf("task_done = %+v", td)
	}
	l := c.roundTrip("l")
	if l.Instances[0].State != transport.InstanceExited {
		t.Fatalf("state %s", l.Instances[0].State)
	}
}

// Item 83 (AC-3.13 fallback): a previous-life instance that cannot be
// re-adopted is listed lost with its session path, and its open task ends
// with a durable aborted task_done.
func TestPreviousLifeLost_83(t *testing.T) {
	c := agentAfter(t,
		agentstore.Instance{InstanceID: "i-aaaaaaaaaaaa", Cwd: "/w/a", State: transport.InstanceRunning, TaskID: "t-old", SessionPath: "/s/a.jsonl"},
		agentstore.Instance{InstanceID: "i-bbbbbbbbbbbb", Cwd: "/w/b", State: transport.InstanceRunning, SessionPath: "/s/b.jsonl"})
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.TaskID != "t-old" || td.InstanceID != "i-aaaaaaaaaaaa" || td.Status != transport.TaskAborted {
		t.Fatalf("task_done = %+v", td)
	}
	l := c.roundTrip("l")
	if len(l.Instances) != 2 {
		t.Fatalf("list = %+v", l.Instances)
	}
	for i, want := range []string{"/s/a.jsonl", "/s/b.jsonl"} {
		if l.Instances[i].State != transport.InstanceLost || l.Instances[i].SessionPath != want {
			t.Errorf("instance %d = %+v", i, l.Instances[i])
		}
	}
}

// Item 84: with two orchestrators connected, the task_done goes to the
// one that submitted the task only.
func TestOwnerPreferred_84(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.OutboxRetryMin = time.Hour }})
	a := h.dial(t)
	a.hello()
	b := h.dial(t)
	b.hello()
	inst := a.mustSpawn("s", h.cwd, "default", nil)
	a.rpc(inst.InstanceID, "t-84", prompt("p", "say: mine"))
	td := nextOf[*transport.TaskDoneFrame](a, nil)
	b.nextEvent(inst.InstanceID, typeIs("agent_settled")) // b sees the events
	a.ack(td)
	a.roundTrip("la")
	b.roundTrip("lb")
	for _, f := range b.seen {
		if _, ok := f.(*transport.TaskDoneFrame); ok {
			t.Fatal("the other orchestrator received the task_done")
		}
	}
}

// An instance recorded as ended whose record still names its task never
// had that task's report stored (storing it closes the task in the same
// transaction: say the disk was full, and the agent stopped before it
// could write the report again). The next agent reports the task aborted
// instead of forgetting it with the instance.
func TestEndedInstanceWithAnOpenTaskReportsIt(t *testing.T) {
	c := agentAfter(t, agentstore.Instance{InstanceID: "i-0123456789ab", Cwd: t.TempDir(),
		State: transport.InstanceExited, TaskID: "t-unstored", TaskOwner: "o"})
	td := nextOf[*transport.TaskDoneFrame](c, nil)
	if td.TaskID != "t-unstored" || td.Status != transport.TaskAborted {
		t.Fatalf("task_done %+v", td)
	}
	c.ack(td)
	if l := c.roundTrip("l").Instances; len(l) != 0 {
		t.Errorf("the ended instance is still listed: %+v", l)
	}
}

// agentAfter starts an agent on a state directory that holds the
// instance records a previous life left, and returns a connection to it,
// its hello done.
func agentAfter(t *testing.T, records ...agentstore.Instance) *client {
	t.Helper()
	dir := shortDir(t, "pa")
	st, err := agentstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if _, err := st.PutInstance(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	c := newHarness(t, hopts{stateDir: dir}).dial(t)
	c.hello()
	return c
}
