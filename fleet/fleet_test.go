package fleet_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// testFleet is a started fleet over a registry holding bundle "default"
// (and whatever publish added), with a subscription to its changes.
type testFleet struct {
	*fleet.Fleet
	sub      *fleet.Subscription
	stateDir string
	regRoot  string
	agents   []fleet.Agent
	reports  chan fleet.TaskReport
}

// publish puts a bundle whose bundle.json is metadata into root.
func publish(t testing.TB, root, name, metadata string) {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "bundle.json"), []byte(metadata), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "AGENTS.md"), []byte("be brief\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.Publish(root, name, src, registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

func fastDialer(c *fleet.Config) {
	c.Dialer.MinRetryInterval = 10 * time.Millisecond
	c.Dialer.MaxRetryInterval = 100 * time.Millisecond
	c.Dialer.FastFailureWindow = 50 * time.Millisecond
}

func startFleet(t testing.TB, stateDir, regRoot string, agents []fleet.Agent, opts ...fleet.Option) *testFleet {
	t.Helper()
	tf := &testFleet{stateDir: stateDir, regRoot: regRoot, agents: agents, reports: make(chan fleet.TaskReport, 64)}
	all := append([]fleet.Option{
		fleet.WithStateDir(stateDir),
		fleet.WithKeyFile(testKeyFile),
		fleet.WithRegistry(regRoot, "127.0.0.1:0"),
		fleet.WithAgents(agents...),
		fleet.WithPrompter(trust.Fixed(trust.Steer)),
		fleet.WithTaskDone(func(r fleet.TaskReport) { tf.reports <- r }),
		fastDialer,
	}, opts...)
	f, err := fleet.New(all...)
	if err != nil {
		t.Fatal(err)
	}
	tf.Fleet = f
	tf.sub = f.Subscribe(4096)
	if err := f.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return tf
}

// newTestFleet starts a fleet with one agent per peer (named after the
// peer's machine), a fresh state directory and registry.
func newTestFleet(t testing.TB, peers ...*testAgentPeer) *testFleet {
	t.Helper()
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	var agents []fleet.Agent
	for _, p := range peers {
		agents = append(agents, fleet.Agent{Name: p.machine, Addresses: []string{p.Addr()}})
	}
	tf := startFleet(t, t.TempDir(), reg, agents)
	for _, p := range peers {
		tf.waitAgent(t, p.machine, transport.StateEstablished)
	}
	return tf
}

// startAgain starts a new fleet (a restarted server) on tf's state
// directory, registry and agents, with opts; tf is closed already.
func (tf *testFleet) startAgain(t testing.TB, opts ...fleet.Option) *testFleet {
	t.Helper()
	return startFleet(t, tf.stateDir, tf.regRoot, tf.agents, opts...)
}

// rewriteStored changes, in the state directory of a closed fleet, the
// stored task and instance as a server killed in the middle of a step
// left them: edit changes the task, and the instance takes that state.
func rewriteStored(t testing.TB, stateDir, taskID, instanceID string, edit func(*serverstore.Task), state fleet.InstanceState) {
	t.Helper()
	st, err := serverstore.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(func(tx *serverstore.Tx) error {
		tr, _, err := tx.Task(taskID)
		if err != nil {
			return err
		}
		edit(&tr)
		if _, err := tx.PutTask(tr); err != nil {
			return err
		}
		ir, _, err := tx.Instance(instanceID)
		if err != nil {
			return err
		}
		ir.State = string(state)
		_, err = tx.PutInstance(ir)
		return err
	})
	if err := errors.Join(err, st.Close()); err != nil {
		t.Fatal(err)
	}
}

// holdRuns makes the peer's prompts start (agent_start) without settling,
// until the test releases them.
func (p *testAgentPeer) holdRuns() {
	p.mu.Lock()
	p.holdPrompts = true
	p.mu.Unlock()
}

// waitUntil waits, change by change, until cond holds on the status.
func (tf *testFleet) waitUntil(t testing.TB, what string, cond func(fleet.Status) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		if cond(tf.Status(ctx)) {
			return
		}
		select {
		case _, ok := <-tf.sub.C:
			if !ok {
				t.Fatalf("subscription closed waiting for %s", what)
			}
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; status: %+v", what, tf.Status(context.Background()))
		}
	}
}

// waitChange reads changes until one satisfies match.
func (tf *testFleet) waitChange(t *testing.T, what string, match func(fleet.Change) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c, ok := <-tf.sub.C:
			if !ok {
				t.Fatalf("subscription closed waiting for %s", what)
			}
			if match(c) {
				return
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (tf *testFleet) waitAgent(t testing.TB, name string, state transport.ConnState) {
	t.Helper()
	tf.waitUntil(t, "agent "+name+" "+string(state), func(s fleet.Status) bool {
		for _, a := range s.Agents {
			if a.Name == name {
				return a.State == state
			}
		}
		return false
	})
}

func (tf *testFleet) waitInstance(t *testing.T, id string, state fleet.InstanceState) {
	t.Helper()
	tf.waitUntil(t, "instance "+id+" "+string(state), func(s fleet.Status) bool {
		for _, i := range s.Instances {
			if i.InstanceID == id {
				return i.State == state
			}
		}
		return false
	})
}

func (tf *testFleet) report(t *testing.T) fleet.TaskReport {
	t.Helper()
	select {
	case r := <-tf.reports:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no task_done notification")
		return fleet.TaskReport{}
	}
}

func spawn(t testing.TB, tf *testFleet, machine string) *fleet.Instance {
	t.Helper()
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: machine, Cwd: "/work/repo", Bundle: "default"})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func TestSpawnWalksToIdleAndPromptReturnsTheLastAssistantText(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)

	var phases []string
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "default",
		OnProgress: func(p fleet.SpawnProgress) { phases = append(phases, p.Phase) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := inst.State(); got != fleet.StateIdle {
		t.Fatalf("after spawn: %s, want idle", got)
	}
	if strings.Join(phases, ",") != "accepted,provisioning" {
		t.Errorf("progress phases %v", phases)
	}
	sp := nextFrame[*transport.SpawnFrame](t, peer)
	if sp.TraceID == "" || !strings.HasPrefix(sp.Env["PI_FLEET_SERVER"], "http://127.0.0.1:") {
		t.Errorf("spawn frame: traceId %q, env %v: want a minted trace id and the registry URL", sp.TraceID, sp.Env)
	}
	var trail []string
	for _, c := range drainChanges(tf.sub) {
		if c.Kind == fleet.ChangeInstanceState {
			trail = append(trail, c.To)
		}
	}
	if want := "spawning provisioning idle"; strings.Join(trail, " ") != want {
		t.Errorf("spawn trail %q, want %q (spawn_progress accepted, provisioning, then spawned)", strings.Join(trail, " "), want)
	}

	var mu sync.Mutex
	var types []string
	text, err := inst.Prompt(t.Context(), "fix the tests", fleet.PromptOptions{OnEvent: func(e fleet.Event) {
		mu.Lock()
		defer mu.Unlock()
		types = append(types, e.Type)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "done: fix the tests (" + inst.ID() + ")"; text != want {
		t.Errorf("Prompt returned %q, want %q", text, want)
	}
	mu.Lock()
	if got := strings.Join(types, ","); got != "agent_start,message_end,agent_end,agent_settled" {
		t.Errorf("streamed events %s", got)
	}
	mu.Unlock()
	if got := inst.State(); got != fleet.StateIdle {
		t.Errorf("after settle: %s, want idle", got)
	}
	rpc := nextFrame[*transport.RPCFrame](t, peer)
	if rpc.TraceID != sp.TraceID || rpc.TaskID != "" {
		t.Errorf("prompt rpc: traceId %q taskId %q; want the spawn's trace id and no task", rpc.TraceID, rpc.TaskID)
	}
}

func drainChanges(s *fleet.Subscription) []fleet.Change {
	var out []fleet.Change
	for {
		select {
		case c := <-s.C:
			out = append(out, c)
		default:
			return out
		}
	}
}

func TestSpawnErrorCarriesTheAgentsCode(t *testing.T) {
	peer := newTestAgentPeer(t, "box", false)
	peer.spawnError = &transport.SpawnErrorFrame{Code: "max_workers", Message: "machine at capacity: 2/2 workers running"}
	tf := newTestFleet(t, peer)

	_, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "default"})
	var se *fleet.SpawnError
	if !errors.As(err, &se) || se.Code != "max_workers" || !errors.Is(err, fleet.ErrSpawn) {
		t.Fatalf("Spawn error = %v, want a *SpawnError with code max_workers", err)
	}
}

func TestPlatformMismatchIsRefusedBeforeAnyFrame(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	publish(t, tf.regRoot, "winonly", `{"platforms":["win32"]}`)

	_, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "winonly"})
	var pe *bundle.PlatformError
	if !errors.As(err, &pe) || pe.Platform != "linux" {
		t.Fatalf("Spawn error = %v, want a *bundle.PlatformError for linux", err)
	}
	// A list is a request the peer answers in order: once answered, any
	// spawn frame sent before it would have been received.
	inst := spawn(t, tf, "box")
	_ = inst
	for _, fr := range drainFrames(peer) {
		if sp, ok := fr.(*transport.SpawnFrame); ok && sp.Bundle == "winonly" {
			t.Fatal("a spawn frame for the refused bundle reached the agent")
		}
	}
}

func TestTwoInstancesStreamsNeverMix(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	a, b := spawn(t, tf, "box"), spawn(t, tf, "box")

	var mu sync.Mutex
	seen := map[string][]string{}
	collect := func(self string) func(fleet.Event) {
		return func(e fleet.Event) {
			mu.Lock()
			defer mu.Unlock()
			seen[self] = append(seen[self], e.InstanceID)
		}
	}
	ra, err := a.PromptAsync(t.Context(), "task A", fleet.PromptOptions{OnEvent: collect(a.ID())})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.PromptAsync(t.Context(), "task B", fleet.PromptOptions{OnEvent: collect(b.ID())})
	if err != nil {
		t.Fatal(err)
	}
	ta, err := ra.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tb, err := rb.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ta, "task A ("+a.ID()) || !strings.Contains(tb, "task B ("+b.ID()) {
		t.Errorf("results crossed: A got %q, B got %q", ta, tb)
	}
	mu.Lock()
	defer mu.Unlock()
	for self, ids := range seen {
		if len(ids) != 4 {
			t.Errorf("%s saw %d events, want 4", self, len(ids))
		}
		for _, id := range ids {
			if id != self {
				t.Errorf("%s's stream carried an event of %s", self, id)
			}
		}
	}
}

// submitAndFinish submits a tracked task and waits for its notification.
func submitAndFinish(t *testing.T, tf *testFleet, inst *fleet.Instance, text string) (*fleet.Task, fleet.TaskReport) {
	t.Helper()
	task, err := inst.Submit(t.Context(), text, fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := tf.report(t)
	if r.TaskID != task.ID() || r.InstanceID != inst.ID() {
		t.Fatalf("report %+v, want task %s of %s", r, task.ID(), inst.ID())
	}
	tf.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)
	return task, r
}

func TestTaskDoneIsNotifiedOnceAndAcked(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")

	task, r := submitAndFinish(t, tf, inst, "write the docs")
	rpc := nextFrame[*transport.RPCFrame](t, peer)
	if rpc.TaskID != task.ID() {
		t.Errorf("tracked prompt carries task %q, want %q", rpc.TaskID, task.ID())
	}
	ack := nextFrame[*transport.TaskDoneAckFrame](t, peer)
	if ack.TaskID != task.ID() || ack.Seq != float64(r.Seq) {
		t.Errorf("ack %+v, want task %s seq %v", ack, task.ID(), r.Seq)
	}
	if r.Status != "settled" || !strings.Contains(r.LastAssistantMessage, "write the docs") {
		t.Errorf("report %+v", r)
	}

	// The agent replays the same report (its ack was lost): acked again,
	// not notified again.
	dup := &transport.TaskDoneFrame{TaskID: task.ID(), InstanceID: inst.ID(), Seq: float64(r.Seq), Status: transport.TaskSettled, Summary: "again"}
	peer.send(peer.conn(), dup)
	ack2 := nextFrame[*transport.TaskDoneAckFrame](t, peer)
	if ack2.Seq != float64(r.Seq) {
		t.Errorf("duplicate acked with seq %v, want %v", ack2.Seq, r.Seq)
	}
	// Notifications keep receipt order: a new report after the duplicate
	// is the next one the application hears of.
	barrier := &transport.TaskDoneFrame{TaskID: task.ID(), InstanceID: inst.ID(), Seq: float64(r.Seq + 1), Status: transport.TaskSettled, Summary: "barrier"}
	peer.send(peer.conn(), barrier)
	if next := tf.report(t); next.Seq != r.Seq+1 {
		t.Fatalf("next notification has seq %v, want the barrier's %v: the duplicate was notified again", next.Seq, r.Seq+1)
	}
}

func TestRejectSendsTaskRejectAndTheWorkerRunsAgain(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	task, _ := submitAndFinish(t, tf, inst, "add a test")

	escalated, err := task.Reject(t.Context(), "the test does not fail without the fix")
	if err != nil || escalated {
		t.Fatalf("Reject = %v, %v", escalated, err)
	}
	rej := nextFrame[*transport.TaskRejectFrame](t, peer)
	if rej.TaskID != task.ID() || rej.Feedback != "the test does not fail without the fix" {
		t.Errorf("task_reject %+v", rej)
	}
	r := tf.report(t) // the revision's task_done
	if !strings.Contains(r.LastAssistantMessage, "does not fail") {
		t.Errorf("revision report %+v", r)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)
	if info := task.Info(); info.Rejects != 1 || len(info.Feedback) != 1 || !info.Feedback[0].Delivered {
		t.Errorf("task after one rejection: %+v", info)
	}
}

func TestMaxRejectsEscalatesAndAHumanDecides(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	publish(t, tf.regRoot, "strict", `{"review":{"maxRejects":1}}`)
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "strict"})
	if err != nil {
		t.Fatal(err)
	}
	task, _ := submitAndFinish(t, tf, inst, "refactor")
	if esc, err := task.Reject(t.Context(), "too big"); err != nil || esc {
		t.Fatalf("first Reject = %v, %v; want delivered", esc, err)
	}
	tf.report(t)
	tf.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)
	esc, err := task.Reject(t.Context(), "still too big")
	if err != nil || !esc {
		t.Fatalf("second Reject = %v, %v; want escalated (maxRejects 1)", esc, err)
	}
	if got := inst.State(); got != fleet.StateEscalated {
		t.Fatalf("state %s, want escalated", got)
	}
	if err := task.Decide(t.Context(), fleet.Verdict{Accept: true, Disposition: transport.DispositionKeepIdle}); err != nil {
		t.Fatal(err)
	}
	if got := inst.State(); got != fleet.StateIdle {
		t.Errorf("after the human's keep_idle accept: %s, want idle", got)
	}
	// A keep_idle accept is sent without waiting for an answer: wait for
	// the frame itself before counting what came before it.
	var rejects int
	frames, accept := framesThrough[*transport.TaskAcceptFrame](t, peer)
	for _, fr := range frames {
		if _, ok := fr.(*transport.TaskRejectFrame); ok {
			rejects++
		}
	}
	if rejects != 1 {
		t.Errorf("%d task_reject frames, want 1 (the escalating rejection is not delivered)", rejects)
	}
	if accept == nil || accept.Disposition != transport.DispositionKeepIdle || accept.TaskID != task.ID() {
		t.Errorf("task_accept %+v", accept)
	}
	if info := task.Info(); info.Rejects != 2 || info.Verdict != "accepted by human" {
		t.Errorf("task %+v", info)
	}
}

func TestAcceptDispositions(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)

	keep := spawn(t, tf, "box")
	task, _ := submitAndFinish(t, tf, keep, "one")
	if err := task.Accept(t.Context(), transport.DispositionKeepIdle); err != nil {
		t.Fatal(err)
	}
	if got := keep.State(); got != fleet.StateIdle {
		t.Errorf("keep_idle: %s, want idle", got)
	}

	stop := spawn(t, tf, "box")
	task, _ = submitAndFinish(t, tf, stop, "two")
	if err := task.Accept(t.Context(), transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
	if got := stop.State(); got != fleet.StateStopped {
		t.Errorf("stop: %s, want stopped", got)
	}
	// A pifleet agent stops the worker itself on task_accept stop.
	for _, fr := range drainFrames(peer) {
		if _, ok := fr.(*transport.StopFrame); ok {
			t.Error("a stop frame followed task_accept {disposition:stop}")
		}
	}
}

func TestTypeScriptAgentAcceptStopIsAStop(t *testing.T) {
	peer := newTestAgentPeer(t, "tsbox", false)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "tsbox")
	task, _ := submitAndFinish(t, tf, inst, "one")
	if err := task.Accept(t.Context(), transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
	if got := inst.State(); got != fleet.StateStopped {
		t.Errorf("%s, want stopped", got)
	}
	nextFrame[*transport.StopFrame](t, peer)
	for _, fr := range drainFrames(peer) {
		if _, ok := fr.(*transport.TaskAcceptFrame); ok {
			t.Error("task_accept sent to an agent without pifleet-v1")
		}
	}
}

func TestReconnectReplaysMissedEvents(t *testing.T) {
	tf, peer, proxy := proxiedFleet(t)
	inst := spawn(t, tf, "box")
	peer.holdRuns()
	run, err := inst.PromptAsync(t.Context(), "long job", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nextFrame[*transport.RPCFrame](t, peer) // the peer has started the run
	old := peer.conn()

	proxy.Refuse(true) // no reconnect until the worker has finished
	proxy.Cut()
	tf.waitInstance(t, inst.ID(), fleet.StateUnreachable)
	<-old.Done()
	peer.releaseHeld() // the worker settles while the server cannot see it
	proxy.Refuse(false)

	text, err := run.Wait(t.Context())
	if err != nil || text != "done: long job ("+inst.ID()+")" {
		t.Fatalf("run = %q, %v; want the answer replayed after the reconnect", text, err)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateIdle)
	out, err := inst.Output(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ends int
	for _, raw := range out.Tail {
		if strings.Contains(string(raw), `"message_end"`) {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("the tail holds %d message_end events, want exactly 1 (replay without duplicates)", ends)
	}
}

func TestConnectionCutMakesInstancesUnreachableAndReconnectReconciles(t *testing.T) {
	tf, peer, proxy := proxiedFleet(t)
	survivor, vanished := spawn(t, tf, "box"), spawn(t, tf, "box")

	drainChanges(tf.sub)
	peer.forget(vanished.ID()) // the worker dies while the server cannot see it
	proxy.Cut()
	tf.waitChange(t, "agent lost", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeAgentState && c.To == string(transport.StateLost)
	})
	tf.waitChange(t, "survivor unreachable", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == survivor.ID() && c.To == string(fleet.StateUnreachable)
	})
	tf.waitChange(t, "survivor reconnected idle", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == survivor.ID() && c.Event == string(fleet.EventReconnectedIdle)
	})
	tf.waitInstance(t, vanished.ID(), fleet.StateStopped)
	if proxy.Accepted() < 2 {
		t.Errorf("proxy accepted %d connections, want a reconnect", proxy.Accepted())
	}
	// The reconnected agent is usable again.
	if _, err := survivor.Prompt(t.Context(), "still there?", fleet.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestServerRestartKeepsTasksAndDedupe(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	task, r := submitAndFinish(t, tf, inst, "persist me")
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}

	tf2 := tf.startAgain(t)
	tf2.waitAgent(t, "box", transport.StateEstablished)
	if got := tf2.Tasks(); len(got) != 1 || got[0].TaskID != task.ID() || got[0].State != fleet.TaskAwaitingReview {
		t.Fatalf("tasks after restart: %+v", got)
	}
	inst2, err := tf2.Instance(inst.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := inst2.State(); got != fleet.StateAwaitingReview {
		t.Errorf("instance after restart: %s, want awaiting_review", got)
	}
	// The agent replays the report whose ack the first server sent: a
	// duplicate for the restarted server too.
	drainFrames(peer)
	peer.send(peer.conn(), &transport.TaskDoneFrame{TaskID: task.ID(), InstanceID: inst.ID(), Seq: float64(r.Seq), Status: transport.TaskSettled, Summary: "x"})
	nextFrame[*transport.TaskDoneAckFrame](t, peer)
	peer.send(peer.conn(), &transport.TaskDoneFrame{TaskID: task.ID(), InstanceID: inst.ID(), Seq: float64(r.Seq + 5), Status: transport.TaskSettled, Summary: "barrier"})
	if next := tf2.report(t); next.Seq != r.Seq+5 {
		t.Fatalf("restarted server notified seq %v first; want only the new report %v", next.Seq, r.Seq+5)
	}
	task2, _ := tf2.Task(task.ID())
	if err := task2.Accept(t.Context(), transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
}

func TestFileServiceAndTypedErrors(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")

	res, err := inst.Read(t.Context(), "main.go", fleet.ReadOptions{})
	if err != nil || res.Text == nil || *res.Text != "contents of main.go" {
		t.Fatalf("Read = %+v, %v", res, err)
	}
	if res, err := inst.Diff(t.Context(), fleet.DiffOptions{Stat: true}); err != nil || res.Text == nil {
		t.Fatalf("Diff = %+v, %v", res, err)
	}
	_, err = inst.List(t.Context(), "../etc")
	var fe *fleet.FileError
	if !errors.As(err, &fe) || fe.Code != "path_escape" {
		t.Fatalf("List outside the cwd = %v, want a path_escape *FileError", err)
	}
	if _, err := tf.Instance("nope"); !errors.Is(err, fleet.ErrUnknownInstance) {
		t.Errorf("unknown instance: %v", err)
	}
	if _, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "elsewhere", Cwd: "/", Bundle: "default"}); !errors.Is(err, fleet.ErrUnknownAgent) {
		t.Errorf("unknown agent: %v", err)
	}
	if err := inst.Abort(t.Context()); !errors.Is(err, fleet.ErrInvalidState) {
		t.Errorf("abort of an idle worker: %v, want ErrInvalidState", err)
	}
}

func TestAbortOfARunningPrompt(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	peer.holdRuns()
	run, err := inst.PromptAsync(t.Context(), "long job", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := inst.State(); got != fleet.StateRunning {
		t.Fatalf("%s, want running", got)
	}
	if err := inst.Abort(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateIdle)
}

func TestTypeScriptAgentGetsRejectAsATrackedPrompt(t *testing.T) {
	peer := newTestAgentPeer(t, "tsbox", false) // no pifleet-v1 capability
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "tsbox")
	task, _ := submitAndFinish(t, tf, inst, "first try")
	nextFrame[*transport.RPCFrame](t, peer)
	if _, err := task.Reject(t.Context(), "try harder"); err != nil {
		t.Fatal(err)
	}
	rpc := nextFrame[*transport.RPCFrame](t, peer)
	if rpc.TaskID != task.ID() || !strings.Contains(string(rpc.Command), "Revision requested: try harder") {
		t.Errorf("revision rpc %+v %s", rpc, rpc.Command)
	}
	tf.report(t)
	for _, fr := range drainFrames(peer) {
		if _, ok := fr.(*transport.TaskRejectFrame); ok {
			t.Error("a task_reject frame was sent to an agent without pifleet-v1")
		}
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	spawn(t, tf, "box")
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tf.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := tf.Spawn(context.Background(), fleet.SpawnOptions{Agent: "box", Cwd: "/", Bundle: "default"}); !errors.Is(err, fleet.ErrClosed) {
		t.Errorf("Spawn after Close: %v, want ErrClosed", err)
	}
}

func TestPendingNotificationOfAPreviousRunIsDeliveredOnceAtStart(t *testing.T) {
	state, reg := t.TempDir(), t.TempDir()
	publish(t, reg, "default", `{}`)
	// A previous server recorded this task_done and died before telling
	// the application.
	st, err := serverstore.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	td := serverstore.TaskDone{TaskID: "t-1", InstanceID: "i-1", Seq: 42, Status: "settled", Summary: "it works"}
	if _, err := st.RecordTaskDone(td, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	tf := startFleet(t, state, reg, nil)
	if r := tf.report(t); r.Key != (fleet.TaskKey{InstanceID: "i-1", TaskID: "t-1", Seq: 42}) || r.Key.String() != td.Key().String() || r.Summary != "it works" {
		t.Fatalf("report %+v", r)
	}
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	tf2 := startFleet(t, state, reg, nil)
	// Close waits for the notifier: anything pending would be delivered
	// before it returns.
	if err := tf2.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-tf2.reports:
		t.Fatalf("notified again after a restart: %+v", r)
	default:
	}
}

func TestEvidencePromptsDuringReviewMoveNothing(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	task, _ := submitAndFinish(t, tf, inst, "fix it")
	if err := task.StartReview(t.Context()); err != nil {
		t.Fatal(err)
	}
	text, err := inst.Prompt(t.Context(), "show git diff --stat", fleet.PromptOptions{})
	if err != nil || !strings.Contains(text, "git diff") {
		t.Fatalf("evidence prompt = %q, %v", text, err)
	}
	if got := inst.State(); got != fleet.StateVerifying {
		t.Errorf("after an evidence prompt: %s, want verifying", got)
	}
	if _, err := inst.Submit(t.Context(), "another task", fleet.PromptOptions{}); !errors.Is(err, fleet.ErrInvalidState) {
		t.Errorf("a new task during review: %v, want ErrInvalidState", err)
	}
}
