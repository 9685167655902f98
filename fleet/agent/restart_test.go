//go:build unix

package agent

import (
	"bufio"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/internal/testnet"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
)

// AC-3.13 in one process: an agent closes (its workers keep running under
// their shims); a new agent on the same state directory re-adopts the
// worker with the same instance id, and the task that was running
// completes with exactly one task_done.
func TestReadoptInProcess(t *testing.T) {
	h1 := newHarness(t, hopts{})
	fifo := mkfifo(t, h1.cwd, "gate")
	c := h1.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h1.cwd, "default", nil)
	c.rpc(inst.InstanceID, "t-adopt", prompt("p", "bash: cat gate"))
	c.nextEvent(inst.InstanceID, typeIs("tool_execution_start"))
	h1.a.Close()

	h2 := newHarness(t, hopts{stateDir: h1.cfg.StateDir, agentDir: h1.agentDir, cwd: h1.cwd, registry: h1.registry})
	d := h2.dial(t)
	d.hello()
	l := d.roundTrip("l")
	if len(l.Instances) != 1 || l.Instances[0].InstanceID != inst.InstanceID || l.Instances[0].State != transport.InstanceRunning {
		t.Fatalf("after restart: %+v", l.Instances)
	}
	release(t, fifo)
	td := nextOf[*transport.TaskDoneFrame](d, nil)
	if td.TaskID != "t-adopt" || td.Status != transport.TaskSettled || td.InstanceID != inst.InstanceID {
		t.Fatalf("task_done %+v", td)
	}
	d.ack(td)
	// control resumed: a new command reaches the same worker
	d.rpc(inst.InstanceID, "", prompt("p2", "say: still here"))
	d.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	d.roundTrip("l2")
	for _, f := range d.seen {
		if x, ok := f.(*transport.TaskDoneFrame); ok && x != td {
			t.Fatalf("second task_done %+v", x)
		}
	}
}

// agentProc is a pifleet-agent process.
type agentProc struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	held chan struct{} // closed when it logs that a spawn is held (EnvSpawnHold)
}

var buildOnce struct {
	sync.Once
	path string
	err  error
}

// agentBinary builds cmd/pifleet-agent once per test binary.
func agentBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pab")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "pifleet-agent")
		out, err := exec.Command("go", "build", "-o", buildOnce.path, filepath.Join(pitest.RepoRoot(t), "cmd", "pifleet-agent")).CombinedOutput()
		if err != nil {
			buildOnce.err = fmt.Errorf("%v: %s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatalf("build pifleet-agent: %v", buildOnce.err)
	}
	return buildOnce.path
}

// world is what a restarted agent process shares with its predecessor.
type world struct {
	bin, port, stateDir, registry, cwd, worker string
	env                                        []string
}

func newWorld(t *testing.T) *world {
	ps := pitest.Command(t, pitest.Scripted, pitest.Options{})
	reg := t.TempDir()
	publishTestBundles(t, reg)
	_, port, _ := net.SplitHostPort(testnet.UnusedAddr(t, "127.0.0.1"))
	return &world{bin: agentBinary(t), port: port, stateDir: shortDir(t, "pa"), registry: reg, cwd: ps.Dir,
		worker: ps.Path, env: append(ps.Env, "PIFLEET_SESSIONS_ROOT="+filepath.Join(ps.AgentDir, "sessions"))}
}

// start runs the agent and waits until it listens (its log says so).
func (w *world) start(t *testing.T) *agentProc { return w.startWith(t) }

// startWith is start with more environment variables.
func (w *world) startWith(t *testing.T, env ...string) *agentProc {
	t.Helper()
	cmd := exec.Command(w.bin, "--log-format", "json", "serve", "--listen", "127.0.0.1:"+w.port, "--server", pinned,
		"--server-key", auth.FormatPublicKey(testServerKey.Public().(ed25519.PublicKey)), "--whois-static", "127.0.0.1="+pinned, "--state-dir", w.stateDir, "--pi", w.worker, "--registry", w.registry)
	cmd.Env = append(slices.Clone(w.env), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &agentProc{cmd: cmd, addr: "127.0.0.1:" + w.port, done: make(chan struct{}), held: make(chan struct{})}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once, heldOnce := sync.Once{}, sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"message":"listening"`) {
				once.Do(func() { close(listening) })
			}
			if strings.Contains(sc.Text(), "spawn held for a fault-injection test") {
				heldOnce.Do(func() { close(p.held) })
			}
			if testing.Verbose() {
				t.Log(sc.Text())
			}
		}
	}()
	go func() { cmd.Wait(); close(p.done) }()
	select {
	case <-listening:
	case <-p.done:
		t.Fatal("agent exited before listening")
	case <-time.After(waitLimit):
		t.Fatal("agent never listened")
	}
	return p
}

func (p *agentProc) kill9(t *testing.T) {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stopAll stops every running worker through a last agent, so that no
// shim outlives the test.
func (w *world) stopAll(t *testing.T) {
	p := w.start(t)
	c := dialAddr(t, p.addr, "")
	c.hello()
	for i, in := range c.roundTrip("final").Instances {
		if in.State == transport.InstanceRunning {
			st := &transport.StopFrame{InstanceID: in.InstanceID}
			st.ID = "stop" + strconv.Itoa(i)
			c.send(st)
			c.reply(st.ID)
		}
	}
	p.kill9(t)
}

// AC-3.13 with a real agent process: kill -9 of the agent while a task
// runs; the restarted agent re-adopts the same instance id and the task's
// task_done is delivered exactly once.
func TestKill9WhileTaskRuns(t *testing.T) {
	w := newWorld(t)
	fifo := mkfifo(t, w.cwd, "gate")
	p := w.start(t)
	c := dialAddr(t, p.addr, "")
	c.hello()
	inst := c.mustSpawn("s", w.cwd, "default", nil)
	c.rpc(inst.InstanceID, "t-k9", prompt("p", "bash: cat gate"))
	c.nextEvent(inst.InstanceID, typeIs("tool_execution_start"))
	p.kill9(t)
	<-c.closed

	p = w.start(t)
	d := dialAddr(t, p.addr, "")
	d.hello()
	l := d.roundTrip("l")
	if len(l.Instances) != 1 || l.Instances[0].InstanceID != inst.InstanceID || l.Instances[0].State != transport.InstanceRunning {
		t.Fatalf("after kill -9 and restart: %+v", l.Instances)
	}
	release(t, fifo)
	td := nextOf[*transport.TaskDoneFrame](d, nil)
	if td.TaskID != "t-k9" || td.Status != transport.TaskSettled {
		t.Fatalf("task_done %+v", td)
	}
	d.ack(td)
	d.roundTrip("l2")
	p.kill9(t)

	p = w.start(t)
	e := dialAddr(t, p.addr, "")
	e.hello()
	e.roundTrip("l3")
	for _, f := range append(d.seen, e.seen...) {
		if x, ok := f.(*transport.TaskDoneFrame); ok && x != td {
			t.Fatalf("task_done delivered again: %+v", x)
		}
	}
	p.kill9(t)
	w.stopAll(t)
}

// Issue #5: kill -9 of the agent at random moments, many times, loses no
// task_done and never delivers one that was acknowledged.
func TestKill9AtRandomMoments(t *testing.T) {
	if testing.Short() {
		t.Skip("starts many agent processes")
	}
	const rounds = 20
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed) // rand.NewPCG(5, seed) replays a failing run
	rng := rand.New(rand.NewPCG(5, seed))
	w := newWorld(t)
	type key struct {
		task string
		seq  float64
	}
	submitted := map[string]bool{} // tasks the worker accepted (their prompt was answered)
	reported := map[string]bool{}  // tasks a task_done was received for
	acked := map[key]bool{}        // acks confirmed by a later answer
	var instID string
	check := func(c *client, f transport.Frame) {
		if td, ok := f.(*transport.TaskDoneFrame); ok {
			if acked[key{td.TaskID, td.Seq}] {
				t.Fatalf("acked task_done %s/%v delivered again", td.TaskID, td.Seq)
			}
			reported[td.TaskID] = true
		}
		if ev, ok := f.(*transport.EventFrame); ok {
			e := decodeEvent(t, ev)
			if e.Type == "response" && e.Command == "prompt" && strings.HasPrefix(e.ID, "p-") && e.Success {
				submitted["t-"+strings.TrimPrefix(e.ID, "p-")] = true
			}
		}
	}
	for round := range rounds {
		p := w.start(t)
		c := dialAddr(t, p.addr, "")
		c.hello()
		if instID == "" {
			instID = c.mustSpawn("s", w.cwd, "default", nil).InstanceID
		}
		// a task per round, then kill after a random number of frames
		c.rpc(instID, "t-"+strconv.Itoa(round), prompt("p-"+strconv.Itoa(round), "say: round "+strconv.Itoa(round)))
		var toAck []*transport.TaskDoneFrame
		for range rng.IntN(12) {
			f := c.next(func(transport.Frame) bool { return true }, "any frame")
			check(c, f)
			if td, ok := f.(*transport.TaskDoneFrame); ok && rng.IntN(2) == 0 {
				c.ack(td)
				toAck = append(toAck, td)
			}
		}
		if rng.IntN(2) == 0 && len(toAck) > 0 {
			// confirm the acks: the answer comes after they were handled
			c.send(&transport.ListFrame{Header: transport.Header{ID: "confirm"}})
			for {
				f := c.next(func(transport.Frame) bool { return true }, "confirm")
				if f.Envelope().ID == "confirm" {
					break
				}
				check(c, f)
			}
			for _, td := range toAck {
				acked[key{td.TaskID, td.Seq}] = true
			}
		}
		p.kill9(t)
	}
	// A last agent: everything still unacked arrives, exactly the rest.
	p := w.start(t)
	c := dialAddr(t, p.addr, "")
	c.hello()
	for _, f := range c.seen {
		check(c, f)
	}
	c.seen = nil
	missing := func() []string {
		var m []string
		for task := range submitted {
			if !reported[task] {
				m = append(m, task)
			}
		}
		return m
	}
	timeout := time.After(20 * time.Second)
	for len(missing()) > 0 {
		select {
		case f := <-c.frames:
			check(c, f)
			continue
		case <-timeout:
		}
		break
	}
	if m := missing(); len(m) > 0 {
		t.Errorf("task_done lost for %v (submitted %v, reported %v)", m, submitted, reported)
	}
	p.kill9(t)
	w.stopAll(t)
}
