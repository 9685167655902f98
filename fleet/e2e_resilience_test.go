//go:build unix

package fleet_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/netfault"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
)

// procWait bounds every wait on a process, a log line or a change, so a
// broken fleet fails with a message instead of hanging; it never paces a
// test.
const procWait = 60 * time.Second

var built struct {
	sync.Once
	server, agent string
	err           error
}

// binaries builds cmd/pifleet-server and cmd/pifleet-agent once per test
// binary (the agent binary is also the workers' shim).
func binaries(t testing.TB) (server, agent string) {
	t.Helper()
	built.Do(func() {
		dir, err := os.MkdirTemp("", "pfbin")
		if err != nil {
			built.err = err
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/pifleet-server", "./cmd/pifleet-agent")
		cmd.Dir = pitest.RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("%v: %s", err, out)
			return
		}
		built.server, built.agent = filepath.Join(dir, "pifleet-server"), filepath.Join(dir, "pifleet-agent")
	})
	if built.err != nil {
		t.Fatalf("build the binaries: %v", built.err)
	}
	return built.server, built.agent
}

// proc is a pifleet process started with --log-format json; the test
// waits on its log lines and its exit.
type proc struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process exited
	stderr *os.File
	reader sync.WaitGroup

	mu     sync.Mutex
	lines  []string
	logged chan struct{} // closed (and replaced) at every new line
}

// startProc starts bin and waits until it logs ready.
func startProc(t *testing.T, name, bin string, env []string, ready string, args ...string) *proc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, done: make(chan struct{}), stderr: r, logged: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"--log-format", "json", "--log-level", "debug"}, args...)...)
	p.cmd.Env = env
	// A file, not a pipe exec copies: the agent's shims may inherit it and
	// outlive the process, and Wait must not wait for them.
	p.cmd.Stderr = w
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p.reader.Go(func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.logged)
			p.logged = make(chan struct{})
			p.mu.Unlock()
		}
	})
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill9()
		p.stderr.Close()
		p.reader.Wait()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("%s log:\n%s", p.name, strings.Join(p.lines, "\n"))
			p.mu.Unlock()
		}
	})
	p.waitLog(t, "its ready line", func(l logLine) bool { return l.Message == ready })
	return p
}

// logLine is the part of a zerolog JSON line the tests look at.
type logLine struct {
	Message string `json:"message"`
	TaskID  string `json:"taskId"`
	// Of the connection transitions of a dialling agent and the server's
	// trust decisions.
	Event   string  `json:"event"`
	To      string  `json:"to"`
	RetryIn float64 `json:"retryIn"` // milliseconds
	Machine string  `json:"machine"`
}

// waitLog waits until the process logged a line that match accepts (a
// line logged before the call counts).
func (p *proc) waitLog(t *testing.T, what string, match func(logLine) bool) {
	t.Helper()
	timeout := time.After(procWait)
	for seen := 0; ; {
		p.mu.Lock()
		lines, logged := p.lines[seen:], p.logged
		seen = len(p.lines)
		p.mu.Unlock()
		for _, raw := range lines {
			var l logLine
			if json.Unmarshal([]byte(raw), &l) == nil && match(l) {
				return
			}
		}
		select {
		case <-logged:
		case <-p.done:
			t.Fatalf("%s exited (%v) before logging %s", p.name, p.cmd.ProcessState, what)
		case <-timeout:
			t.Fatalf("%s never logged %s", p.name, what)
		}
	}
}

// kill9 kills the process with SIGKILL and waits for its end.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// terminate asks the process to stop (SIGTERM) and wants a clean exit.
func (p *proc) terminate(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(procWait):
		t.Fatalf("%s ignored SIGTERM", p.name)
	}
	if !p.cmd.ProcessState.Success() {
		t.Errorf("%s exited with %v", p.name, p.cmd.ProcessState)
	}
}

// processEnv is the test's environment without PIFLEET_ variables, so
// that nothing of the caller's configuration reaches the processes.
func processEnv(base []string, extra ...string) []string {
	var env []string
	for _, kv := range base {
		if !strings.HasPrefix(kv, "PIFLEET_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// agentWorld is what a restarted pifleet-agent shares with its
// predecessor: its port, state directory, worker and worker cwd.
type agentWorld struct {
	bin, addr, cwd, stateDir string
	args, env                []string
}

// newAgentWorld prepares a pifleet-agent announcing machine, obeying only
// the server the static whois names pin.
func newAgentWorld(t *testing.T, machine, pin, whois string) *agentWorld {
	t.Helper()
	_, bin := binaries(t)
	ps := pitest.Command(t, pitest.Scripted, pitest.Options{})
	addr := refusedAddr(t)         // the agent listens there once started
	stateDir := shortDir(t, "pfa") // shim socket paths must stay short
	// Registered before any agent starts, so it runs after the agents
	// were killed: whatever worker they left running is stopped, and the
	// test fails naming it.
	e2ekit.CleanupWorkers(t, stateDir)
	return &agentWorld{bin: bin, addr: addr, cwd: ps.Dir, stateDir: stateDir,
		args: []string{"serve", "--listen", addr, "--machine", machine, "--server", pin, "--whois-static", whois,
			"--server-key", auth.FormatPublicKey(testServerKey), "--state-dir", stateDir, "--pi", ps.Path},
		env: processEnv(ps.Env, "PIFLEET_SESSIONS_ROOT="+filepath.Join(ps.AgentDir, "sessions"))}
}

// start runs the agent and waits until it listens.
func (w *agentWorld) start(t *testing.T) *proc {
	t.Helper()
	return startProc(t, "pifleet-agent", w.bin, w.env, "listening", w.args...)
}

func shortDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// gate is a fifo in dir: a worker running "bash: cat NAME" blocks in the
// tool until the test opens it.
func gate(t *testing.T, dir, name string) (open func()) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	open = func() {
		once.Do(func() {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			f.WriteString("go\n")
			f.Close()
		})
	}
	// A failed test must not leave a worker blocked for ever. The fifo is
	// opened non-blocking: without a reader there is nothing to release.
	t.Cleanup(func() {
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			once.Do(func() { f.WriteString("go\n") })
			f.Close()
		}
	})
	return open
}

// nextChange reads the watch stream until match accepts a change.
func nextChange(t *testing.T, s *controlapi.Stream, what string, match func(controlapi.Change) bool) controlapi.Change {
	t.Helper()
	for {
		c, err := s.Next()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(c) {
			return c
		}
	}
}

// countToEnd reads the stream to its end (the server went away) and
// returns the task_done changes of task.
func countToEnd(t *testing.T, s *controlapi.Stream, task string) (n int) {
	t.Helper()
	for {
		c, err := s.Next()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				t.Fatalf("the watch stream did not end with the server: %v", err)
			}
			return n
		}
		if c.Kind == controlapi.ChangeTaskDone && c.TaskID == task {
			n++
		}
	}
}

// AC-3.5 with real processes: pifleet-server is killed with -9 while a
// task runs, the task finishes while no server is up (the agent keeps its
// task_done), and the restarted server, on the same state directory,
// tells the application of it exactly once.
//
// "Exactly once" is shown by two observables. The watch stream is the
// server's application channel: the first server's stream (subscribed
// before the task) and the second's (subscribed before the agent could
// send anything: the proxy holds the connection until the watch is open)
// are read to their ends, and carry the task's task_done once in all.
// The state file, opened after the second server stopped, has one
// task_done recorded for the task, marked notified, and none pending, so
// no later start would tell it again.
func TestServerKill9WhileATaskFinishes(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end with processes")
	}
	serverBin, _ := binaries(t)
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	aw := newAgentWorld(t, "box", "box", "127.0.0.1=box")
	aw.args = append(aw.args, "--behind-proxy") // the server reaches it through the proxy
	release := gate(t, aw.cwd, "gate")
	agentProc := aw.start(t)
	proxy, err := netfault.Start(aw.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })

	stateDir := shortDir(t, "pfs") // the control socket lives there
	copyKeyFile(t, stateDir)
	serve := func() *proc {
		return startProc(t, "pifleet-server", serverBin, processEnv(os.Environ()), "pifleet-server serving",
			"serve", "--state-dir", stateDir, "--registry", reg, "--listen", "127.0.0.1:0",
			"--agent", "box="+proxy.Addr(), "--whois-static", "127.0.0.1=box")
	}
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	// The first connection is held until box is trusted (otherwise it is
	// refused as an unanswered first contact and dialled again a second
	// later).
	proxy.Stall(netfault.Both)
	server := serve()
	c, err := controlapi.NewClient(controlapi.DefaultAddr(stateDir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w1, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	if _, err := c.TrustSet(ctx, "box", controlapi.PolicySteer); err != nil {
		t.Fatal(err)
	}
	proxy.Resume()
	nextChange(t, w1, "box established", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeAgentState && ch.Agent == "box" && ch.To == string(transport.StateEstablished)
	})
	sp, err := c.Spawn(ctx, controlapi.SpawnRequest{Agent: "box", Cwd: aw.cwd, Bundle: "plain"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := sp.InstanceID
	pr, err := c.Prompt(ctx, id, controlapi.PromptRequest{Text: "bash: cat gate", Task: true})
	if err != nil || pr.TaskID == "" {
		t.Fatalf("prompt --task: %+v, %v", pr, err)
	}
	task := pr.TaskID
	nextChange(t, w1, "the worker blocked in its tool", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeEvent && ch.InstanceID == id && ch.Event == "tool_execution_start"
	})

	server.kill9()
	doneBeforeKill := countToEnd(t, w1, task)
	release()
	agentProc.waitLog(t, "the task's end", func(l logLine) bool { return l.Message == "task done" && l.TaskID == task })

	// The agent's task_done waits in its outbox. The second server's
	// connection is held in the proxy until the watch is open, so the
	// stream sees everything the agent sends.
	proxy.Stall(netfault.Both)
	server = serve()
	w2, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	proxy.Resume()
	// The review state changes with the receipt; the notification
	// follows: either may come first on the stream.
	var doneCh *controlapi.Change
	for review := false; doneCh == nil || !review; {
		ch := nextChange(t, w2, "the task_done and the review", func(ch controlapi.Change) bool {
			return ch.Kind == controlapi.ChangeTaskDone && ch.TaskID == task ||
				ch.Kind == controlapi.ChangeInstanceState && ch.InstanceID == id && ch.To == string(fleet.StateAwaitingReview)
		})
		if ch.Kind == controlapi.ChangeTaskDone {
			if doneCh != nil {
				t.Fatalf("a second task_done change: %+v", ch)
			}
			doneCh = &ch
		} else {
			review = true
		}
	}
	var td controlapi.TaskDone
	if err := json.Unmarshal(doneCh.Data, &td); err != nil || td.Status != "settled" || td.Summary == "" {
		t.Fatalf("task_done change: %v %s", err, doneCh.Data)
	}
	tasks, err := c.Tasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].ID != task || tasks[0].State != string(fleet.TaskAwaitingReview) ||
		tasks[0].LastDone == nil || tasks[0].LastDone.Seq != td.Seq {
		t.Fatalf("tasks after the restart: %+v", tasks)
	}
	if err := c.Accept(ctx, task, controlapi.DispositionStop); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Instances) != 1 || st.Instances[0].ID != id || st.Instances[0].State != string(fleet.StateStopped) {
		t.Errorf("instances after accept with stop: %+v", st.Instances)
	}
	server.terminate(t)
	if n := doneBeforeKill + 1 + countToEnd(t, w2, task); n != 1 {
		t.Errorf("the application was told of the task_done %d times (first server: %d)", n, doneBeforeKill)
	}

	store, err := serverstore.Open(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pending, notified, err := store.DeliveryCounts()
	if err != nil || pending != 0 || notified != 1 {
		t.Errorf("deliveries: %d pending, %d notified, %v; want none pending and the one notified", pending, notified, err)
	}
	d, ok, err := store.Delivery(serverstore.DedupeKey{InstanceID: id, TaskID: task, Seq: float64(td.Seq)})
	if err != nil || !ok || !d.Notified {
		t.Errorf("the task_done's delivery: %+v %v %v", d, ok, err)
	}
	agentProc.terminate(t)
}

// AC-3.13 seen from the fleet: the agent process is killed with -9 while
// a task runs; the worker keeps running under its shim; the restarted
// agent re-adopts it, the fleet finds the same instance id running again,
// and the task's task_done reaches the application once.
func TestAgentKill9MidTaskIsReadopted(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end with processes")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	aw := newAgentWorld(t, "worker-01", "orchestrator", "127.0.0.1=orchestrator/ana@example")
	release := gate(t, aw.cwd, "gate")
	agentProc := aw.start(t)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{aw.addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: aw.cwd, Bundle: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = inst.Stop(context.Background())
		}
	})
	blocked := make(chan struct{})
	var once sync.Once
	task, err := inst.Submit(t.Context(), "bash: cat gate", fleet.PromptOptions{OnEvent: func(e fleet.Event) {
		if e.Type == "tool_execution_start" {
			once.Do(func() { close(blocked) })
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-blocked:
	case <-time.After(procWait):
		t.Fatal("the worker never started its tool")
	}

	drainChanges(tf.sub)
	agentProc.kill9()
	tf.waitChange(t, "unreachable", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.To == string(fleet.StateUnreachable)
	})
	agentProc = aw.start(t)
	// Only a re-adopted worker is reported running by the new agent.
	tf.waitChange(t, "the same instance running again", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.Event == string(fleet.EventReconnectedRunning)
	})
	if st := tf.Status(t.Context()); len(st.Instances) != 1 || st.Instances[0].InstanceID != inst.ID() {
		t.Fatalf("instances after the agent's restart: %+v", st.Instances)
	}

	release()
	if r := tf.report(t); r.TaskID != task.ID() || r.InstanceID != inst.ID() || r.Status != "settled" {
		t.Fatalf("report %+v", r)
	}
	tf.waitInstance(t, inst.ID(), fleet.StateAwaitingReview)
	if err := task.Accept(t.Context(), transport.DispositionStop); err != nil {
		t.Fatal(err)
	}
	stopped = true
	// Close waits for the notifier: a second notification would be in
	// reports by then.
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-tf.reports:
		t.Errorf("notified again: %+v", r)
	default:
	}
	store, err := serverstore.Open(tf.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if pending, notified, err := store.DeliveryCounts(); err != nil || pending != 0 || notified != 1 {
		t.Errorf("deliveries: %d pending, %d notified, %v; want the one task_done notified", pending, notified, err)
	}
	agentProc.terminate(t)
}

// AC-3.3 through the SDK on one real agent daemon: two workers run at the
// same time (each blocked in a tool until both are), and each prompt's
// stream carries only its own worker's events, complete and in order.
func TestTwoWorkersInParallelStreamsNeverMix(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	addr, cwd := startAgent(t, reg)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)

	type worker struct {
		name    string
		inst    *fleet.Instance
		release func()
		started chan struct{}
		mu      sync.Mutex
		events  []fleet.Event
		run     *fleet.Run
	}
	workers := []*worker{{name: "A"}, {name: "B"}}
	for _, w := range workers {
		inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: cwd, Bundle: "plain"})
		if err != nil {
			t.Fatal(err)
		}
		w.inst, w.release, w.started = inst, gate(t, cwd, "gate"+w.name), make(chan struct{})
		t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	}
	for _, w := range workers {
		var once sync.Once
		run, err := w.inst.PromptAsync(t.Context(), "bash: cat gate"+w.name+" >/dev/null; echo mark-"+w.name,
			fleet.PromptOptions{OnEvent: func(e fleet.Event) {
				w.mu.Lock()
				w.events = append(w.events, e)
				w.mu.Unlock()
				if e.Type == "tool_execution_start" {
					once.Do(func() { close(w.started) })
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		w.run = run
	}
	for _, w := range workers {
		select {
		case <-w.started:
		case <-time.After(procWait):
			t.Fatalf("worker %s never started its tool", w.name)
		}
	}
	// Both run now. B finishes first.
	for _, w := range []*worker{workers[1], workers[0]} {
		w.release()
		text, err := w.run.Wait(t.Context())
		if want := "faux: tool results: bash=mark-" + w.name; err != nil || text != want {
			t.Errorf("worker %s answered %q, %v; want %q", w.name, text, err, want)
		}
	}
	for i, w := range workers {
		other := workers[1-i]
		w.mu.Lock()
		defer w.mu.Unlock()
		var types []string
		for _, e := range w.events {
			if e.InstanceID != w.inst.ID() {
				t.Errorf("worker %s's stream carried an event of %s", w.name, e.InstanceID)
			}
			if strings.Contains(string(e.Raw()), "gate"+other.name) || strings.Contains(string(e.Raw()), "mark-"+other.name) {
				t.Errorf("worker %s's stream carried worker %s's event %s", w.name, other.name, e.Raw())
			}
			switch e.Type {
			case "agent_start", "tool_execution_start", "tool_execution_end", "agent_end", "agent_settled":
				types = append(types, e.Type)
			}
		}
		if got, want := strings.Join(types, " "), "agent_start tool_execution_start tool_execution_end agent_end agent_settled"; got != want {
			t.Errorf("worker %s's stream: %s, want %s", w.name, got, want)
		}
		var sawMark bool
		for _, e := range w.events {
			sawMark = sawMark || e.Type == "tool_execution_end" && strings.Contains(string(e.Raw()), "mark-"+w.name)
		}
		if !sawMark {
			t.Errorf("worker %s's stream lacks its own tool result", w.name)
		}
	}
}

// copyKeyFile puts the tests' server key into a server state directory,
// so that a pifleet-server process proves the key the agents trust.
func copyKeyFile(t testing.TB, stateDir string) {
	t.Helper()
	data, err := os.ReadFile(testKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stateDir, fleet.KeyFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
}
