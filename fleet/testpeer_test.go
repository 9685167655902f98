package fleet_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
)

// testAgentPeer is a scripted agent for protocol-level tests of the SDK:
// a real TCP listener on loopback speaking protocol v1 (plus the pifleet
// frames when pifleet is set) through transport.Conn. It is not the agent
// daemon: it runs no pi, it answers each prompt at once with reply(text)
// as a pi worker would stream it (agent_start, message_end, agent_end,
// agent_settled), and a tracked prompt with a task_done.
type testAgentPeer struct {
	t        testing.TB
	ln       net.Listener
	machine  string
	platform string
	pifleet  bool
	key      ed25519.PrivateKey // proven when it dials in
	// beat, when set, is how its connections send heartbeats (the
	// interval and the Heartbeats that sends them); the default is
	// transport's, a goroutine per connection every 15 s.
	beat transport.Options

	mu         sync.Mutex
	conns      []*transport.Conn
	instances  map[string]*peerInstance
	order      []string
	nextID     int
	seq        float64
	spawnError *transport.SpawnErrorFrame
	reply      func(instanceID, text string) string
	// holdPrompts makes prompts start (agent_start) without settling;
	// onHold, when set, is told of each prompt held, once it is.
	holdPrompts bool
	held        map[string]peerRun
	onHold      func(instanceID string)
	// updates is how many message_update events precede each answer.
	updates int
	tasks   map[string]string // task id → instance id
	// holdGetState makes get_state answers wait for releaseGetState;
	// getStateHeld gets a token for each one held.
	holdGetState bool
	heldGetState []func()
	getStateHeld chan struct{}
	// stopGate, when set, is handed the stopped answer of each stop (and
	// task_accept with stop) to send when it likes, instead of its being
	// sent at once; the worker counts as stopped already.
	stopGate func(send func())
	// spawnGate, when set, is handed the rest of each spawn (after
	// spawn_progress accepted: provisioning, then spawned) to send when it
	// likes (a spawn that takes long), instead of its being sent at once.
	spawnGate func(send func())
	// script, when set, sees every frame first and answers it (reply
	// sets the request's id) when it returns true; caps are extra hello
	// capabilities. Set both before the fleet connects.
	script func(c *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool
	caps   []string
	// sessionDir, when set, gives every worker spawned on a new session a
	// session file there (reported in spawned), whose entries
	// session_entries answers with none.
	sessionDir string

	// refuse makes the peer close every connection it accepts at once
	// (an agent that is down while its address stays taken).
	refuse bool

	frames chan transport.Frame // every frame received, in order
	wg     sync.WaitGroup
}

type peerInstance struct {
	info transport.InstanceInfo
	seq  float64 // event ring seq
	ring []*transport.EventFrame
}

type peerRun struct {
	text, taskID string
}

func newTestAgentPeer(t testing.TB, machine string, pifleet bool, opts ...func(*testAgentPeer)) *testAgentPeer {
	t.Helper()
	return newTestAgentPeerAt(t, "127.0.0.1:0", machine, pifleet, opts...)
}

// newTestAgentPeerAt is newTestAgentPeer listening at addr; opts change
// the peer before it accepts a connection.
func newTestAgentPeerAt(t testing.TB, addr, machine string, pifleet bool, opts ...func(*testAgentPeer)) *testAgentPeer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &testAgentPeer{
		t: t, ln: ln, machine: machine, platform: "linux", pifleet: pifleet,
		instances: map[string]*peerInstance{}, held: map[string]peerRun{}, tasks: map[string]string{},
		frames:       make(chan transport.Frame, 4096),
		getStateHeld: make(chan struct{}, 16),
		reply:        func(id, text string) string { return "done: " + text + " (" + id + ")" },
		seq:          1_700_000_000_000,
	}
	_, p.key, _ = ed25519.GenerateKey(nil)
	for _, opt := range opts {
		opt(p)
	}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *testAgentPeer) Addr() string { return p.ln.Addr().String() }

// Close stops listening and closes every connection.
func (p *testAgentPeer) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

func (p *testAgentPeer) accept() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			_ = nc.Close()
			continue
		}
		p.serve(nc)
	}
}

// dialIn connects to a fleet's inbound listener, as an agent that dials
// the server itself (seed §5).
func (p *testAgentPeer) dialIn(addr string) {
	p.t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serveAs(nc, true)
}

func (p *testAgentPeer) serve(nc net.Conn) { p.serveAs(nc, false) }

// serveAs speaks as the agent on nc; dialed says that the peer dialled.
// It proves its key when the server's hello asks, as a real agent does
// (it does not check the server's proof: the agent's tests do that), as
// one behind a proxy.
func (p *testAgentPeer) serveAs(nc net.Conn, dialed bool) {
	{
		var c *transport.Conn
		ready := make(chan struct{})
		challenge := auth.NewChallenge()
		c = transport.NewConn(nc, transport.Options{HeartbeatInterval: p.beat.HeartbeatInterval, ExpiryTimeout: p.beat.ExpiryTimeout, Heartbeats: p.beat.Heartbeats, OnHeartbeat: p.beat.OnHeartbeat, Handler: func(fr transport.Frame) {
			<-ready
			if h, ok := fr.(*transport.HelloFrame); ok && h.Role == transport.RoleServer {
				if p.announces(transport.CapabilityTCPLiveness) && slices.Contains(h.Capabilities, transport.CapabilityTCPLiveness) {
					// As an agent does: the server sends no heartbeats.
					if err := c.WatchTCP(); err != nil {
						p.t.Errorf("test peer: %v", err)
					}
				}
				if sc, err := auth.ParseChallenge(h.Challenge); err == nil {
					dir := auth.ServerDialed
					if dialed {
						dir = auth.AgentDialed
					}
					dialer, acceptor := auth.Endpoints(nc, dialed)
					t := auth.Transcript{Direction: dir, AgentMachine: p.machine, AgentChallenge: challenge,
						ServerChallenge: sc, Dialer: dialer, Acceptor: acceptor, Proxied: true}
					p.send(c, &transport.AuthProofFrame{KeyProof: auth.Sign(p.key, transport.RoleAgent, t)})
				}
			}
			p.handle(c, fr)
		}})
		caps := []string{}
		if p.pifleet {
			caps = append(caps, transport.CapabilityPifleet)
		}
		p.mu.Lock()
		caps = append(caps, p.caps...)
		p.mu.Unlock()
		// Listed before the hello goes: once the fleet has the agent
		// established, conn() is this connection, not the one before.
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		_ = c.TrySend(&transport.HelloFrame{Machine: p.machine, Role: transport.RoleAgent, PackageVersion: "test",
			Platform: p.platform, Capabilities: caps, Challenge: auth.EncodeChallenge(challenge),
			Proxied: true}) // tests put netfault proxies in front of it
		close(ready)
		p.wg.Add(1)
		go func() { defer p.wg.Done(); <-c.Done() }()
	}
}

// announces says whether the peer's hello lists capability.
func (p *testAgentPeer) announces(capability string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.caps, capability)
}

// conn returns the latest connection.
func (p *testAgentPeer) conn() *transport.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) == 0 {
		return nil
	}
	return p.conns[len(p.conns)-1]
}

func (p *testAgentPeer) send(c *transport.Conn, fr transport.Frame) {
	// Send waits for room in the queue, as a real agent streaming a busy
	// worker does.
	if err := c.Send(context.Background(), fr); err != nil && !errors.Is(err, transport.ErrClosed) {
		p.t.Errorf("test peer: send %s: %v", fr.FrameType(), err)
	}
}

func (p *testAgentPeer) event(c *transport.Conn, id string, ev string) {
	p.mu.Lock()
	fr := &transport.EventFrame{InstanceID: id, Event: json.RawMessage(ev)}
	if in := p.instances[id]; in != nil && p.pifleet {
		in.seq++
		seq := in.seq
		fr.Seq = &seq
		in.ring = append(in.ring, fr)
	}
	p.mu.Unlock()
	p.send(c, fr)
}

func (p *testAgentPeer) handle(c *transport.Conn, fr transport.Frame) {
	select {
	case p.frames <- fr:
	default:
		p.t.Error("test peer: frame log full")
	}
	p.respond(c, fr)
}

// respond answers fr as the peer does (handle, without logging it: for a
// frame held and answered later).
func (p *testAgentPeer) respond(c *transport.Conn, fr transport.Frame) {
	reply := func(ans transport.Frame) {
		ans.Envelope().ID = fr.Envelope().ID
		if ans.Envelope().TraceID == "" {
			ans.Envelope().TraceID = fr.Envelope().TraceID
		}
		p.send(c, ans)
	}
	p.mu.Lock()
	script := p.script
	p.mu.Unlock()
	if script != nil && script(c, fr, reply) {
		return
	}
	switch fr := fr.(type) {
	case *transport.SpawnFrame:
		p.mu.Lock()
		se := p.spawnError
		p.mu.Unlock()
		if se != nil {
			reply(&transport.SpawnErrorFrame{Code: se.Code, Message: se.Message})
			return
		}
		p.mu.Lock()
		gate := p.spawnGate
		p.mu.Unlock()
		if p.pifleet {
			p.send(c, &transport.SpawnProgressFrame{SpawnID: fr.ID, Phase: transport.SpawnAccepted, Bundle: fr.Bundle})
		}
		provisioning := func() {
			if p.pifleet {
				p.send(c, &transport.SpawnProgressFrame{SpawnID: fr.ID, Phase: transport.SpawnProvisioning, Bundle: fr.Bundle})
			}
		}
		p.mu.Lock()
		p.nextID++
		id := fmt.Sprintf("i-%s-%d", p.machine, p.nextID)
		info := transport.InstanceInfo{InstanceID: id, Cwd: fr.Cwd, Bundle: fr.Bundle, State: transport.InstanceRunning}
		if fr.FromSession != "" { // cloned at once, as a pi agent does
			info.SessionPath = strings.TrimSuffix(fr.FromSession, ".jsonl") + ".clone-" + id + ".jsonl"
		} else if p.sessionDir != "" {
			info.SessionPath = p.sessionDir + "/" + id + ".jsonl"
		}
		p.instances[id] = &peerInstance{info: info}
		p.order = append(p.order, id)
		p.mu.Unlock()
		if gate != nil {
			gate(func() { provisioning(); reply(&transport.SpawnedFrame{Instance: info}) })
			return
		}
		provisioning()
		reply(&transport.SpawnedFrame{Instance: info})
	case *transport.RPCFrame:
		var cmd struct {
			ID, Type, Message string
		}
		_ = json.Unmarshal(fr.Command, &cmd)
		p.mu.Lock()
		in := p.instances[fr.InstanceID]
		p.mu.Unlock()
		if in == nil || in.info.State != transport.InstanceRunning {
			p.send(c, &transport.ErrorFrame{Code: "unknown_instance", Message: "no running instance " + fr.InstanceID})
			return
		}
		switch cmd.Type {
		case "prompt":
			p.run(c, fr.InstanceID, cmd.Message, fr.TaskID)
		case "get_state":
			p.mu.Lock()
			_, streaming := p.held[fr.InstanceID]
			answer := func() {
				p.event(c, fr.InstanceID, fmt.Sprintf(`{"type":"response","id":%q,"command":"get_state","success":true,"data":{"isStreaming":%v,"isCompacting":false,"sessionId":"s-1","messageCount":2,"pendingMessageCount":0}}`, cmd.ID, streaming))
			}
			hold := p.holdGetState
			if hold {
				p.heldGetState = append(p.heldGetState, answer)
			}
			p.mu.Unlock()
			if hold {
				p.getStateHeld <- struct{}{}
				return
			}
			answer()
		case "abort":
			p.mu.Lock()
			_, held := p.held[fr.InstanceID]
			delete(p.held, fr.InstanceID)
			p.mu.Unlock()
			if held {
				p.event(c, fr.InstanceID, `{"type":"agent_end","messages":[]}`)
				p.event(c, fr.InstanceID, `{"type":"agent_settled"}`)
			}
		default:
			// pi answers every other command it knows (set_session_name,
			// set_model, …) with a bare success.
			if cmd.ID != "" {
				p.event(c, fr.InstanceID, fmt.Sprintf(`{"type":"response","id":%q,"command":%q,"success":true}`, cmd.ID, cmd.Type))
			}
		}
	case *transport.TaskRejectFrame:
		p.mu.Lock()
		id := p.tasks[fr.TaskID]
		p.mu.Unlock()
		p.run(c, id, fr.Feedback, fr.TaskID)
	case *transport.StopFrame:
		p.mu.Lock()
		in := p.instances[fr.InstanceID]
		if in != nil {
			in.info.State = transport.InstanceStopped
		}
		p.mu.Unlock()
		if in == nil {
			reply(&transport.ErrorFrame{Code: "unknown_instance", Message: "no instance " + fr.InstanceID})
			return
		}
		p.stopped(func() { reply(&transport.StoppedFrame{InstanceID: fr.InstanceID}) })
	case *transport.ListFrame:
		p.mu.Lock()
		list := []transport.InstanceInfo{}
		for _, id := range p.order {
			if in := p.instances[id]; in != nil {
				list = append(list, in.info)
			}
		}
		p.mu.Unlock()
		reply(&transport.InstancesFrame{Instances: list})
	case *transport.EventsSinceFrame:
		p.mu.Lock()
		var replay []*transport.EventFrame
		var last float64
		if in := p.instances[fr.InstanceID]; in != nil {
			last = in.seq
			for _, ev := range in.ring {
				if *ev.Seq > fr.Since {
					replay = append(replay, ev)
				}
			}
		}
		p.mu.Unlock()
		for _, ev := range replay {
			p.send(c, ev)
		}
		reply(&transport.EventsReplayedFrame{InstanceID: fr.InstanceID, Since: fr.Since, Count: float64(len(replay)), LastSeq: last})
	case *transport.TaskAcceptFrame:
		p.mu.Lock()
		id := p.tasks[fr.TaskID]
		in := p.instances[id]
		p.mu.Unlock()
		if in == nil {
			reply(&transport.ErrorFrame{Code: "unknown_task", Message: "no task " + fr.TaskID})
			return
		}
		if fr.Disposition == transport.DispositionStop {
			p.mu.Lock()
			in.info.State = transport.InstanceStopped
			p.mu.Unlock()
			p.stopped(func() { reply(&transport.StoppedFrame{InstanceID: id}) })
			return
		}
		reply(&transport.InstancesFrame{Instances: []transport.InstanceInfo{in.info}})
	case *transport.SetToolsFrame:
		reply(&transport.ToolsSetFrame{InstanceID: fr.InstanceID, Tools: fr.Tools})
	case *transport.RebundleFrame:
		if fr.Bundle == "broken" {
			p.mu.Lock()
			old := p.instances[fr.InstanceID].info.Bundle
			p.mu.Unlock()
			reply(&transport.RebundledFrame{InstanceID: fr.InstanceID, Bundle: old,
				Error: &transport.FsError{Code: "fetch_failed", Message: "registry unreachable"}})
			return
		}
		p.mu.Lock()
		p.instances[fr.InstanceID].info.Bundle = fr.Bundle
		p.mu.Unlock()
		reply(&transport.RebundledFrame{InstanceID: fr.InstanceID, Switched: true, Bundle: fr.Bundle, BundleHash: "h-" + fr.Bundle})
	case *transport.SessionEntriesFrame:
		p.mu.Lock()
		in := p.instances[fr.InstanceID]
		p.mu.Unlock()
		if in == nil {
			reply(&transport.SessionEntriesResultFrame{After: fr.After, Entries: []byte("[]"),
				Error: &transport.FsError{Code: "unknown_instance", Message: "no instance " + fr.InstanceID}})
			return
		}
		reply(&transport.SessionEntriesResultFrame{Path: in.info.SessionPath, After: fr.After, Entries: []byte("[]")})
	case *transport.FsReadFrame:
		text := "contents of " + fr.Path
		reply(&transport.FsResultFrame{Done: true, Text: &text})
	case *transport.FsDiffFrame:
		text := "diff --git a/x b/x"
		reply(&transport.FsResultFrame{Done: true, Text: &text})
	case *transport.FsListFrame:
		reply(&transport.FsResultFrame{Done: true, Error: &transport.FsError{Code: "path_escape", Message: fr.Path + " escapes the cwd"}})
	}
}

// run streams one prompt's events; a tracked one ends with task_done.
func (p *testAgentPeer) run(c *transport.Conn, id, text, taskID string) {
	if taskID != "" {
		p.mu.Lock()
		p.tasks[taskID] = id
		p.mu.Unlock()
	}
	p.event(c, id, `{"type":"agent_start"}`)
	p.mu.Lock()
	hold, onHold := p.holdPrompts, p.onHold
	if hold {
		p.held[id] = peerRun{text: text, taskID: taskID}
	}
	p.mu.Unlock()
	if hold {
		if onHold != nil {
			onHold(id)
		}
		return
	}
	p.finish(c, id, text, taskID)
}

func (p *testAgentPeer) finish(c *transport.Conn, id, text, taskID string) {
	answer := p.reply(id, text)
	p.mu.Lock()
	updates := p.updates
	p.mu.Unlock()
	for range updates {
		p.event(c, id, `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"x"}}`)
	}
	msg, _ := json.Marshal(map[string]any{"type": "message_end", "message": map[string]any{
		"role": "assistant", "content": []any{map[string]any{"type": "text", "text": answer}}}})
	p.event(c, id, string(msg))
	p.event(c, id, `{"type":"agent_end","messages":[]}`)
	p.event(c, id, `{"type":"agent_settled"}`)
	if taskID != "" {
		p.mu.Lock()
		p.seq++
		seq := p.seq
		p.mu.Unlock()
		p.send(c, &transport.TaskDoneFrame{TaskID: taskID, InstanceID: id, Seq: seq, Status: transport.TaskSettled,
			Summary: answer, LastAssistantMessage: answer})
	}
}

// stopped sends a stopped answer, or hands it to stopGate.
func (p *testAgentPeer) stopped(send func()) {
	p.mu.Lock()
	gate := p.stopGate
	p.mu.Unlock()
	if gate == nil {
		send()
		return
	}
	gate(send)
}

// releaseGetState sends the held get_state answers and stops holding
// them.
func (p *testAgentPeer) releaseGetState() {
	p.mu.Lock()
	held := p.heldGetState
	p.heldGetState = nil
	p.holdGetState = false
	p.mu.Unlock()
	for _, answer := range held {
		answer()
	}
}

// releaseHeld settles every held prompt on the latest connection.
func (p *testAgentPeer) releaseHeld() {
	p.mu.Lock()
	held := p.held
	p.held = map[string]peerRun{}
	p.holdPrompts = false
	p.mu.Unlock()
	c := p.conn()
	for id, r := range held {
		p.finish(c, id, r.text, r.taskID)
	}
}

// askUI sends a worker dialog for instance id.
func (p *testAgentPeer) askUI(id, requestID, title string) {
	p.send(p.conn(), &transport.UIRequestFrame{InstanceID: id, RequestID: requestID, Kind: transport.UIConfirm, Title: title})
}

// setRefuse makes the peer refuse (true) or accept new connections; a
// refusing peer also closes the ones it has.
func (p *testAgentPeer) setRefuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	conns := p.conns
	if on {
		p.conns = nil
	}
	p.mu.Unlock()
	if on {
		for _, c := range conns {
			_ = c.Close()
		}
	}
}

// setState changes what the peer lists for instance id (a worker that
// exited or was lost while the fleet was away).
func (p *testAgentPeer) setState(id string, state transport.InstanceState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.instances[id]; in != nil {
		in.info.State = state
	}
}

// forget makes the peer lose an instance (as if the worker vanished).
func (p *testAgentPeer) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.instances, id)
}

// next returns the next received frame of type T, skipping others.
func nextFrame[T transport.Frame](t *testing.T, p *testAgentPeer) T {
	t.Helper()
	for {
		select {
		case fr := <-p.frames:
			if v, ok := fr.(T); ok {
				return v
			}
		case <-t.Context().Done():
			var zero T
			t.Fatalf("no %T frame", zero)
			return zero
		}
	}
}

// framesThrough waits for the next frame of type T and returns it with
// every frame received before it: for a frame sent without an answer to
// wait for (a keep_idle task_accept), which drainFrames may miss.
func framesThrough[T transport.Frame](t *testing.T, p *testAgentPeer) ([]transport.Frame, T) {
	t.Helper()
	var before []transport.Frame
	for {
		select {
		case fr := <-p.frames:
			if v, ok := fr.(T); ok {
				return before, v
			}
			before = append(before, fr)
		case <-t.Context().Done():
			var zero T
			t.Fatalf("no %T frame", zero)
			return before, zero
		}
	}
}

// drainFrames returns the frames received so far. It does not wait: use it
// to check that a frame was not sent (after a request whose answer orders
// it), and nextFrame or framesThrough to see one that was.
func drainFrames(p *testAgentPeer) []transport.Frame {
	var out []transport.Frame
	for {
		select {
		case fr := <-p.frames:
			out = append(out, fr)
		default:
			return out
		}
	}
}
