package fleet_test

import (
	"strings"
	"testing"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
)

// TestSubmitSendsItsPromptOnlyOnceItsRecordIsDurableAndWaitsWithoutTheLock
// holds the state store's writer while a task is submitted: the task's
// record is queued, the fleet lock stays free for other calls (a get_state
// reaches the agent), the prompt is not sent (the get_state is the first
// frame after the record was queued), and once the writer goes on the
// prompt follows and Submit returns.
func TestSubmitSendsItsPromptOnlyOnceItsRecordIsDurableAndWaitsWithoutTheLock(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	drainFrames(peer)

	queued := tf.PersistQueued(t)
	release := tf.HoldWrites(t)
	type result struct {
		task *fleet.Task
		err  error
	}
	submitted := make(chan result, 1)
	go func() {
		task, err := inst.Submit(t.Context(), "fix the tests", fleet.PromptOptions{})
		submitted <- result{task, err}
	}()
	for w := range queued {
		if strings.HasPrefix(w, "task ") {
			break // the task's record waits behind the held writer
		}
	}
	// The fleet lock is free while Submit waits for the disk.
	tf.Status(t.Context())
	got := make(chan error, 1)
	go func() { _, err := inst.GetState(t.Context()); got <- err }()
	rpc := nextFrame[*transport.RPCFrame](t, peer)
	for rpc.TaskID == "" && !strings.Contains(string(rpc.Command), "get_state") {
		rpc = nextFrame[*transport.RPCFrame](t, peer) // (the session's name, set before the task)
	}
	if rpc.TaskID != "" {
		t.Fatalf("the prompt (task %s) was sent before its record was durable", rpc.TaskID)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-submitted:
		t.Fatalf("Submit returned before its record was durable: %v", r.err)
	default:
	}

	release()
	r := <-submitted
	if r.err != nil {
		t.Fatal(r.err)
	}
	for rpc.TaskID == "" {
		rpc = nextFrame[*transport.RPCFrame](t, peer)
	}
	if rpc.TaskID != r.task.ID() {
		t.Errorf("prompt for task %q, want %q", rpc.TaskID, r.task.ID())
	}
}

// TestSpawnAnswersOnceItsRecordIsDurable holds the state store's writer
// while a worker is spawned: the new instance's record is queued, the
// fleet lock stays free, and Spawn answers only once the writer went on.
func TestSpawnAnswersOnceItsRecordIsDurable(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	// The spawn itself is durable before its frame goes out: the writer
	// is held once the spawn reached the agent, before its answer.
	gate := make(chan func(), 1)
	peer.mu.Lock()
	peer.spawnGate = func(send func()) { gate <- send }
	peer.mu.Unlock()
	queued := tf.PersistQueued(t)
	type result struct {
		inst *fleet.Instance
		err  error
	}
	spawned := make(chan result, 1)
	go func() {
		inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "default"})
		spawned <- result{inst, err}
	}()
	answer := <-gate
	release := tf.HoldWrites(t)
	answer()
	var id string
	for w := range queued {
		if id, _ = strings.CutPrefix(w, "instance "); id != w {
			break
		}
	}
	tf.Status(t.Context()) // the fleet lock is free while Spawn waits for the disk
	select {
	case r := <-spawned:
		t.Fatalf("Spawn answered before its record was durable: %v", r.err)
	default:
	}
	release()
	r := <-spawned
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.inst.ID() != id {
		t.Errorf("Spawn answered %s, the record queued was %s's", r.inst.ID(), id)
	}
}

// TestATaskDoneRecordedBehindAnAbortKeepsItsReport: a task_done whose
// record waits in the write queue while the task is aborted: the record
// lands first (it was decided first) and the abort's write of the task,
// made from the fleet's copy that had not seen the report yet, lands
// after it. The report must stay in the stored task (LastDone), or a
// restart would forget the task ever finished.
func TestATaskDoneRecordedBehindAnAbortKeepsItsReport(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	peer.holdRuns()
	task, err := inst.Submit(t.Context(), "fix the tests", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nextFrame[*transport.RPCFrame](t, peer) // the worker runs the task

	queued := tf.PersistQueued(t)
	release := tf.HoldWrites(t)
	peer.send(peer.conn(), &transport.TaskDoneFrame{TaskID: task.ID(), InstanceID: inst.ID(), Seq: 1,
		Status: transport.TaskSettled, Summary: "done", LastAssistantMessage: "done"})
	waitQueued(t, queued, "task_done ")
	aborted := make(chan error, 1)
	go func() { aborted <- inst.Abort(t.Context()) }()
	waitQueued(t, queued, "task "+task.ID())
	release()
	if err := <-aborted; err != nil {
		t.Fatal(err)
	}
	if r := tf.report(t); r.TaskID != task.ID() {
		t.Fatalf("report %+v", r)
	}

	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := serverstore.Open(tf.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.GetTask(task.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.LastDone == nil || rec.LastDone.Summary != "done" {
		t.Errorf("stored task %s (%s) lost its task_done: LastDone %+v", rec.TaskID, rec.State, rec.LastDone)
	}
}

// waitQueued waits for a queued write whose description starts with
// prefix.
func waitQueued(t *testing.T, queued <-chan string, prefix string) {
	t.Helper()
	for {
		select {
		case w := <-queued:
			if strings.HasPrefix(w, prefix) {
				return
			}
		case <-t.Context().Done():
			t.Fatalf("no write %q queued", prefix)
		}
	}
}
