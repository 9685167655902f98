//go:build unix

package agent

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"go.uber.org/goleak"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/internal/fsmkit/fsmtest"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/internal/shim"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// testServerKey is the key the tests' raw server proves; every harness's
// agent trusts it.
var testServerKey = func() ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err)
	}
	return k
}()

// The test binary also plays the shim (as `pifleet-agent shim` does) and
// two misbehaving workers, chosen by its first argument.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "shim":
			os.Exit(shim.Main(os.Args[2:]))
		case "stubborn":
			os.Exit(misbehave(false))
		case "crasher":
			os.Exit(misbehave(true))
		case "intruder":
			os.Exit(intrude(os.Args[2]))
		}
	}
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	// The worker table's coverage is checked in its own package; here,
	// only that no event is dropped silently.
	trace := fsmtest.StartTrace(fsmtest.Checks{})
	code := trace.Check(m.Run())
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintf(os.Stderr, "goroutines outlived the tests: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// misbehave answers get_state like pi and otherwise ignores abort, stdin
// EOF and SIGTERM (stubborn), or crashes at its first prompt with a line
// on stderr (crasher).
func misbehave(crash bool) int {
	signal.Ignore(syscall.SIGTERM)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var cmd struct{ ID, Type string }
		if json.Unmarshal(in.Bytes(), &cmd) != nil {
			continue
		}
		switch cmd.Type {
		case "get_state":
			fmt.Printf(`{"id":%q,"type":"response","command":"get_state","success":true,"data":{"model":{"id":"stub","provider":"test"},"isStreaming":false,"sessionFile":"/nonexistent/stub.jsonl","sessionId":"s","messageCount":0,"pendingMessageCount":0}}`+"\n", cmd.ID)
		case "prompt":
			fmt.Printf(`{"id":%q,"type":"response","command":"prompt","success":true}`+"\n", cmd.ID)
			fmt.Println(`{"type":"agent_start"}`)
			if crash {
				fmt.Fprintln(os.Stderr, "boom: the worker crashed")
				return 3
			}
		}
	}
	select {} // deaf to EOF
}

// waitLimit guards every wait, so that a broken agent fails a test with a
// message instead of hanging it. It is never a pacing sleep.
const waitLimit = 60 * time.Second

// pinned is the server machine the tests pin.
const pinned = "orchestrator"

// harness is one agent under test plus its world: a registry directory
// with bundles, a worker cwd, an isolated pi agent dir.
type harness struct {
	t        testing.TB
	a        *Agent
	cfg      Config
	registry string
	cwd      string
	agentDir string
	done     chan error
	taskDone chan struct{}
}

// options of newHarness.
type hopts struct {
	worker   []string // the worker command; default: the scripted worker
	static   string   // the whois map; default 127.0.0.1=orchestrator
	stateDir string   // reuse a state dir (agent restart)
	agentDir string
	cwd      string
	registry string
	noRun    bool
	env      []string
	mod      func(*Config)
}

// shortDir is a private temp dir with a short path (shim socket paths).
func shortDir(t testing.TB, prefix string) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newHarness(t testing.TB, o hopts) *harness {
	t.Helper()
	h := &harness{t: t, done: make(chan error, 1), taskDone: make(chan struct{}, 64)}
	ps := pitest.Command(t, pitest.Scripted, pitest.Options{AgentDir: o.agentDir, Cwd: o.cwd})
	h.agentDir, h.cwd = ps.AgentDir, ps.Dir
	h.registry = o.registry
	if h.registry == "" {
		h.registry = t.TempDir()
		publishTestBundles(t, h.registry)
	}
	static := o.static
	if static == "" {
		static = "127.0.0.1=" + pinned + "/ana@example"
	}
	whois, err := identity.ParseStatic(static)
	if err != nil {
		t.Fatal(err)
	}
	stateDir := o.stateDir
	if stateDir == "" {
		stateDir = shortDir(t, "pa")
	}
	command := o.worker
	if command == nil {
		command = []string{ps.Path}
	}
	env := append(slices.Clone(ps.Env), o.env...)
	h.cfg = Config{
		Machine:      "worker-01",
		Listen:       "127.0.0.1:0",
		Pin:          trust.Pin{Machine: pinned},
		Whois:        whois,
		ServerKeys:   []ed25519.PublicKey{testServerKey.Public().(ed25519.PublicKey)},
		StateDir:     stateDir,
		SessionsRoot: filepath.Join(h.agentDir, "sessions"),
		Registry:     h.registry,
		PiCommand:    command,
		ShimCommand:  []string{os.Args[0], "shim"},
		Env:          env,
		StopGrace:    2 * time.Second,
		SessionsPoll: -1,
		Logger:       testLogger(t),
	}
	if o.mod != nil {
		o.mod(&h.cfg)
	}
	a, err := New(h.cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.a = a
	a.hooks.taskDone = func(agentstore.Entry) { h.taskDone <- struct{}{} }
	if !o.noRun {
		h.run()
	}
	return h
}

func (h *harness) run() {
	// Not the test's context: it ends before the cleanups run, and Run
	// lets go of every worker when its context ends, while shutdown
	// still has to stop them. Close ends Run.
	go func() { h.done <- h.a.Run(context.WithoutCancel(h.t.Context())) }()
	select {
	case <-h.a.Ready():
	case err := <-h.done:
		h.t.Fatalf("Run: %v", err)
	case <-time.After(waitLimit):
		h.t.Fatal("agent never listened")
	}
	h.t.Cleanup(h.shutdown)
}

// shutdown stops every worker (tests leave nothing running) and closes
// the agent.
func (h *harness) shutdown() {
	for _, id := range h.a.runningIDs() {
		in := h.a.lookup(id)
		if w := in.worker(); w != nil {
			// t.Context is already cancelled when cleanups run.
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			if _, err := w.Stop(ctx); err == nil {
				in.mu.Lock()
				done := in.pumpDone
				in.mu.Unlock()
				<-done
			}
			cancel()
		}
	}
	h.a.Close()
}

// testLogger logs to the test when -v, else nowhere.
func testLogger(t testing.TB) zerolog.Logger {
	if !testing.Verbose() {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

// publishTestBundles publishes the bundles the tests spawn:
//
//	default   model faux/faux-1, one extension, a skill, a prompt, budget-free
//	plain     no model policy (no probe: for the misbehaving workers)
//	fakeos    platforms [fake-os]
//	narrow    tools [read]
//	pinned    model faux/faux-1, pinned
func publishTestBundles(t testing.TB, root string) {
	t.Helper()
	src := t.TempDir()
	write := func(dir, rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bundles := map[string]string{
		"default": `{"extensions":["ext/hello.ts"],"skills":["skills/review"],"prompts":["prompts/fix.md"],"model":{"primary":{"provider":"faux","id":"faux-1"}}}`,
		"plain":   `{}`,
		"fakeos":  `{"platforms":["fake-os"]}`,
		"narrow":  `{"extensions":["ext/hello.ts"],"tools":{"active":["read"]},"model":{"primary":{"provider":"faux","id":"faux-1"}}}`,
		"pinned":  `{"model":{"primary":{"provider":"faux","id":"faux-1"},"pin":true}}`,
		"turns":   `{"budget":{"maxTurns":1},"model":{"primary":{"provider":"gone","id":"x"},"fallbacks":[{"provider":"faux","id":"faux-1"}]}}`,
	}
	for name, md := range bundles {
		dir := filepath.Join(src, name)
		write(dir, "bundle.json", md)
		write(dir, "ext/hello.ts", "export default function () {}\n")
		write(dir, "skills/review/SKILL.md", "---\nname: review\ndescription: review code\n---\nReview.\n")
		write(dir, "prompts/fix.md", "Fix it.\n")
		if _, err := registry.Publish(root, name, dir, registry.PublishOptions{}); err != nil {
			t.Fatalf("publish %s: %v", name, err)
		}
	}
}

// client is a raw frame client: it speaks JSONL frames over TCP itself,
// so that the tests see exactly what the agent writes.
type client struct {
	t      testing.TB
	nc     net.Conn
	mu     sync.Mutex
	enc    *transport.Encoder
	frames chan transport.Frame
	bytes  chan int // total bytes read so far, after each read
	closed chan struct{}
	seen   []transport.Frame // frames skipped by next, kept for later checks
	// proof is the agent's auth_proof, once received.
	proof chan *transport.AuthProofFrame
	// transcript is the handshake's, once the client greeted.
	transcript auth.Transcript
}

// greeting is how the raw client answers the agent's hello: with a server
// hello proving key (nil: no answer at all), announcing caps.
type greeting struct {
	key  ed25519.PrivateKey
	caps []string
}

// dial connects from 127.0.0.1 (or from local, when set) and proves the
// test server key, as a server that does not announce pifleet-v1.
func (h *harness) dial(t testing.TB) *client { return h.dialFrom(t, "") }

// dialPifleet is dial as a pifleet server (its hello announces pifleet-v1).
func (h *harness) dialPifleet(t testing.TB) *client {
	t.Helper()
	return dialAs(t, h.a.Addr().String(), "", &greeting{key: testServerKey, caps: []string{transport.CapabilityPifleet}})
}

func (h *harness) dialFrom(t testing.TB, local string) *client {
	t.Helper()
	return dialAddr(t, h.a.Addr().String(), local)
}

func dialAddr(t testing.TB, addr, local string) *client {
	t.Helper()
	return dialAs(t, addr, local, &greeting{key: testServerKey})
}

// dialAs connects and answers the agent's hello with g.
func dialAs(t testing.TB, addr, local string, g *greeting) *client {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return newClient(t, nc, g, auth.ServerDialed)
}

// newClient speaks frames on nc (dialled by the test, or accepted from an
// agent that dialled the test: dir says which), answering the agent's
// hello with g (nil: the test answers itself, or not at all).
func newClient(t testing.TB, nc net.Conn, g *greeting, dir auth.Direction) *client {
	c := &client{t: t, nc: nc, enc: transport.NewEncoder(nc), frames: make(chan transport.Frame, 4096),
		bytes: make(chan int, 1), closed: make(chan struct{}), proof: make(chan *transport.AuthProofFrame, 1)}
	counter := &countingReader{r: nc, c: c}
	greeted := make(chan struct{})
	go func() {
		defer close(c.closed)
		dec := transport.NewDecoder(counter)
		for first := true; ; first = false {
			f, err := dec.Decode()
			if h, ok := f.(*transport.HelloFrame); ok && first && g != nil {
				sh := &transport.HelloFrame{Machine: pinned, Role: transport.RoleServer, PackageVersion: "t",
					Platform: "linux", Capabilities: g.caps}
				c.transcript, _ = auth.ServerGreeting(sh, h, nc, dir, []ed25519.PrivateKey{g.key})
				c.mu.Lock()
				c.enc.Encode(sh)
				c.mu.Unlock()
				close(greeted)
			}
			if p, ok := f.(*transport.AuthProofFrame); ok {
				c.proof <- p
				continue
			}
			if err != nil {
				var perr *transport.ProtocolError
				if errors.As(err, &perr) {
					t.Errorf("agent sent a bad frame: %v", err)
					continue
				}
				return
			}
			if _, hb := f.(*transport.HeartbeatFrame); hb {
				continue
			}
			c.frames <- f
		}
	}()
	t.Cleanup(func() { nc.Close() })
	if g != nil {
		// A server sends nothing before its hello.
		select {
		case <-greeted:
		case <-c.closed:
		case <-time.After(waitLimit):
			t.Fatal("no hello from the agent to answer")
		}
	}
	return c
}

type countingReader struct {
	r io.Reader
	c *client
	n int
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += n
	select {
	case <-r.c.bytes:
	default:
	}
	r.c.bytes <- r.n
	return n, err
}

func (c *client) send(f transport.Frame) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enc.Encode(f); err != nil {
		c.t.Fatalf("send %s: %v", f.FrameType(), err)
	}
}

func (c *client) close() { c.nc.Close() }

// next returns the first frame that match accepts, keeping the others in
// seen.
func (c *client) next(match func(transport.Frame) bool, what string) transport.Frame {
	c.t.Helper()
	timeout := time.NewTimer(waitLimit)
	defer timeout.Stop()
	for {
		select {
		case f := <-c.frames:
			if match(f) {
				return f
			}
			c.seen = append(c.seen, f)
		case <-c.closed:
			// drain what was decoded before the close
			select {
			case f := <-c.frames:
				if match(f) {
					return f
				}
				c.seen = append(c.seen, f)
				continue
			default:
			}
			c.t.Fatalf("connection closed while waiting for %s", what)
			return nil
		case <-timeout.C:
			c.t.Fatalf("no %s within %s", what, waitLimit)
			return nil
		}
	}
}

// nextOf returns the next frame of type T (optionally matching ok).
func nextOf[T transport.Frame](c *client, ok func(T) bool) T {
	c.t.Helper()
	var zero T
	f := c.next(func(f transport.Frame) bool {
		v, is := f.(T)
		return is && (ok == nil || ok(v))
	}, fmt.Sprintf("%T", zero))
	return f.(T)
}

// reply waits for the frame answering id.
func (c *client) reply(id string) transport.Frame {
	c.t.Helper()
	return c.next(func(f transport.Frame) bool { return f.Envelope().ID == id }, "answer to "+id)
}

// roundTrip sends a list and waits for its answer: every frame the agent
// sent before handling it has been received (frames of one connection are
// handled in order).
func (c *client) roundTrip(id string) *transport.InstancesFrame {
	c.t.Helper()
	l := &transport.ListFrame{}
	l.ID = id
	c.send(l)
	return c.reply(id).(*transport.InstancesFrame)
}

// event is a worker event as the tests read it.
type event struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Command   string          `json:"command"`
	Success   bool            `json:"success"`
	Data      json.RawMessage `json:"data"`
	Message   json.RawMessage `json:"message"`
	ToolName  string          `json:"toolName"`
	Result    json.RawMessage `json:"result"`
	Method    string          `json:"method"`
	Title     string          `json:"title"`
	RequestID string          `json:"requestId"`
}

func decodeEvent(t testing.TB, f *transport.EventFrame) event {
	var e event
	if err := json.Unmarshal(f.Event, &e); err != nil {
		t.Fatalf("event: %v", err)
	}
	return e
}

// nextEvent waits for an event of instance id whose decoded form ok
// accepts.
func (c *client) nextEvent(id string, ok func(event) bool) (*transport.EventFrame, event) {
	c.t.Helper()
	var ev event
	f := nextOf(c, func(f *transport.EventFrame) bool {
		if f.InstanceID != id {
			return false
		}
		ev = decodeEvent(c.t, f)
		return ok(ev)
	})
	return f, ev
}

func typeIs(typ string) func(event) bool { return func(e event) bool { return e.Type == typ } }

// hello reads the connection's hello (the first frame).
func (c *client) hello() *transport.HelloFrame {
	c.t.Helper()
	select {
	case f := <-c.frames:
		h, ok := f.(*transport.HelloFrame)
		if !ok {
			c.t.Fatalf("first frame is %s, not hello", f.FrameType())
		}
		return h
	case <-time.After(waitLimit):
		c.t.Fatal("no hello")
		return nil
	}
}

// spawn spawns bundle in cwd and returns the answer.
func (c *client) spawn(id, cwd, bundle string, mod func(*transport.SpawnFrame)) transport.Frame {
	c.t.Helper()
	f := &transport.SpawnFrame{Cwd: cwd, Bundle: bundle}
	f.ID = id
	if mod != nil {
		mod(f)
	}
	c.send(f)
	return c.reply(id)
}

// mustSpawn spawns and fails the test unless spawned.
func (c *client) mustSpawn(id, cwd, bundle string, mod func(*transport.SpawnFrame)) transport.InstanceInfo {
	c.t.Helper()
	switch f := c.spawn(id, cwd, bundle, mod).(type) {
	case *transport.SpawnedFrame:
		return f.Instance
	case *transport.SpawnErrorFrame:
		c.t.Fatalf("spawn refused: %s: %s", f.Code, f.Message)
	default:
		c.t.Fatalf("spawn answered %s", f.FrameType())
	}
	return transport.InstanceInfo{}
}

// rpc sends a command to an instance.
func (c *client) rpc(instanceID, taskID string, cmd map[string]any) {
	c.t.Helper()
	raw, err := json.Marshal(cmd)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(&transport.RPCFrame{InstanceID: instanceID, Command: raw, TaskID: taskID})
}

func prompt(id, msg string) map[string]any {
	return map[string]any{"type": "prompt", "id": id, "message": msg}
}

func (a *Agent) runningIDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ids []string
	for id, in := range a.instances {
		if in.running() {
			ids = append(ids, id)
		}
	}
	return ids
}

// ackAll acknowledges f.
func (c *client) ack(f *transport.TaskDoneFrame) {
	c.send(&transport.TaskDoneAckFrame{TaskID: f.TaskID, Seq: f.Seq})
}

// awaitTaskDone returns the next task_done on c that is none of before.
func awaitTaskDone(c *client, before ...*transport.TaskDoneFrame) *transport.TaskDoneFrame {
	return nextOf[*transport.TaskDoneFrame](c, func(f *transport.TaskDoneFrame) bool {
		return !slices.ContainsFunc(before, func(b *transport.TaskDoneFrame) bool { return b.Seq == f.Seq })
	})
}

// mkfifo makes a named pipe the worker's tools can block on, so that a
// test decides when a run ends without sleeping.
func mkfifo(t testing.TB, dir, name string) string {
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// release writes to a fifo (unblocking the reader).
func release(t testing.TB, fifo string) {
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("go\n")
	f.Close()
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
