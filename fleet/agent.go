package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// Where an agent entry came from.
const (
	sourceStatic   = "static"
	sourceTailnet  = "tailnet"
	sourceInbound  = "inbound"
	sourceRestored = "restored" // known only from the instance registry
)

// maxOrphans bounds the frames kept for an instance id the fleet does not
// know yet (events that overtake the spawned answer being registered).
const maxOrphans = 256

// agentState is one agent: its directory entry, its connection and the
// connection machine of seed §2 (transport.ConnectionTable).
type agentState struct {
	name   string
	addrs  []string
	source string

	m           fsmkit.Machine[transport.ConnState, transport.ConnEvent]
	conn        *transport.Conn
	hello       *transport.HelloFrame
	identity    identity.Identity
	policy      trust.Policy
	pifleet     bool
	lastErr     string
	connectedAt time.Time
	lostAt      time.Time
	addr        string

	// waiters are requests whose answers are handled on the connection's
	// handler goroutine (spawn, stop), keyed by request id.
	waiters map[string]*waiter
	// spawning maps a spawn request id to its instance until spawned;
	// it and its instances are the core's, guarded like it (coreState).
	spawning map[string]*instance
	orphans  map[string][]*transport.EventFrame
	// execs are the commands started on this connection, by exec id,
	// until their exit.
	execs map[string]*Execution
	// catchUp serialises the agent's session catch-ups (seed §9: one
	// catch_up at a time per projection).
	catchUp sync.Mutex
}

// announces reports whether the agent's hello offered capability c
// (f.mu held).
func (a *agentState) announces(c string) bool {
	return a.hello != nil && slices.Contains(a.hello.Capabilities, c)
}

// waiter is a request whose answer changes state: onAnswer runs on the
// handler goroutine with f.mu held, then the frame is delivered.
type waiter struct {
	onAnswer func(transport.Frame)
	ch       chan transport.Frame // buffered 1; closed without a value when the connection is lost
}

func newAgentState(name string, addrs []string, source string) *agentState {
	return &agentState{
		name:     name,
		addrs:    slices.Clone(addrs),
		source:   source,
		m:        transport.ConnectionTable.Start(),
		waiters:  map[string]*waiter{},
		spawning: map[string]*instance{},
		orphans:  map[string][]*transport.EventFrame{},
	}
}

func (a *agentState) established() bool { return a.conn != nil }

func (a *agentState) platform() string {
	if a.hello == nil {
		return ""
	}
	return a.hello.Platform
}

// fireConnLocked moves a's connection machine. f.mu must be held.
func (f *Fleet) fireConnLocked(a *agentState, ev transport.ConnEvent, cause error) bool {
	from := a.m.State()
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	f.dirMu.Lock()
	err := a.m.Fire(ev)
	if err == nil && cause != nil {
		a.lastErr = msg
	}
	f.dirMu.Unlock()
	if err != nil {
		f.log.Debug().Str("agent", a.name).Str("event", string(ev)).Str("state", string(from)).Msg("stale connection event dropped")
		return false
	}
	logMsg := "connection transition"
	switch a.m.State() {
	case transport.StateEstablished:
		logMsg = "agent connected"
	case transport.StateLost:
		if from == transport.StateEstablished {
			logMsg = "agent lost"
		}
	}
	f.log.Info().Str("agent", a.name).Str("event", string(ev)).Str("from", string(from)).Str("to", string(a.m.State())).
		Str("cause", msg).Msg(logMsg)
	f.publishLocked(Change{Kind: ChangeAgentState, Agent: a.name, Event: string(ev), From: string(from),
		To: string(a.m.State()), Message: msg})
	f.agentsChangedLocked()
	return true
}

// agentsChangedLocked wakes every WaitAgent. f.mu must be held, and it
// is called after the change it reports (a woken WaitAgent looks again
// under dirMu alone, and must see it).
func (f *Fleet) agentsChangedLocked() {
	f.dirMu.Lock()
	defer f.dirMu.Unlock()
	close(f.agentsChanged)
	f.agentsChanged = make(chan struct{})
}

// setDirLocked makes a change to what dirMu guards (see Fleet.dirMu).
// f.mu must be held.
func (f *Fleet) setDirLocked(change func()) {
	f.dirMu.Lock()
	defer f.dirMu.Unlock()
	change()
}

// WaitAgent waits until the agent name has an established connection,
// through lost connections and the dialer's retries. It returns at once
// when the agent is connected; an error wrapping ErrAgentRefused when trust
// refused it (change its policy, then Retry); ErrUnknownAgent when no such
// agent is in the directory and none can appear (no tailnet discovery, no
// inbound listener); ErrClosed once the fleet is closed; and, when ctx ends
// first, an error wrapping both ErrNotConnected and ctx's error.
func (f *Fleet) WaitAgent(ctx context.Context, name string) error {
	return f.waitAgent(ctx, name, true)
}

// waitAgent is WaitAgent; without throughLoss it gives up with
// ErrNotConnected as soon as the agent is lost (a dial failed, or the
// connection broke) rather than waiting for the dialer's next attempt:
// Spawn waits for a dial in progress only.
func (f *Fleet) waitAgent(ctx context.Context, name string, throughLoss bool) error {
	for {
		f.dirMu.Lock()
		if f.state == lifeClosed {
			f.dirMu.Unlock()
			return ErrClosed
		}
		a := f.agents[name]
		state := transport.ConnState("unknown")
		if a != nil {
			state = a.m.State()
		}
		switch {
		case a == nil && f.cfg.Tailnet == nil && f.cfg.InboundListen == "":
			f.dirMu.Unlock()
			return fmt.Errorf("%w: %q", ErrUnknownAgent, name)
		case a != nil && a.established() && f.state == lifeStarted:
			f.dirMu.Unlock()
			return nil
		case state == transport.StateRejected:
			err := &AgentRefusedError{Agent: name, Reason: a.lastErr}
			f.dirMu.Unlock()
			return err
		case !throughLoss && f.state == lifeStarted && (a == nil || state == transport.StateLost || state == transport.StateClosed):
			err := fmt.Errorf("%w: %s is %s", ErrNotConnected, name, state)
			if a != nil && a.lastErr != "" {
				err = fmt.Errorf("%w: %s is %s (%s)", ErrNotConnected, name, state, a.lastErr)
			}
			f.dirMu.Unlock()
			return err
		}
		changed := f.agentsChanged
		f.dirMu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: %s is %s: %w", ErrNotConnected, name, state, context.Cause(ctx))
		}
	}
}

// establish makes c the agent's connection: allowed → established, our
// hello, the handler, the loss watcher and the reconciliation.
func (f *Fleet) establish(a *agentState, c *transport.Conn, addr string, hello *transport.HelloFrame,
	early []transport.Frame, id identity.Identity, policy trust.Policy) error {
	f.mu.Lock()
	if f.state != lifeStarted || a.established() {
		f.mu.Unlock()
		_ = c.Close()
		if a.established() {
			return nil
		}
		return ErrClosed
	}
	if !f.fireConnLocked(a, transport.EventAllowed, nil) {
		f.mu.Unlock()
		_ = c.Close()
		return fmt.Errorf("fleet: agent %s: connection machine in %s", a.name, a.m.State())
	}
	// Our hello is queued before the connection can be seen (a.conn):
	// it must be the first frame the agent reads, before any request
	// (an agent that dialled in counts itself connected only on it).
	_ = c.TrySend(&transport.HelloFrame{Machine: "pifleet-server", Role: transport.RoleServer,
		PackageVersion: Version, Platform: hostPlatform(), Capabilities: f.capabilities()})
	if !f.cfg.NoTCPLiveness && slices.Contains(hello.Capabilities, transport.CapabilityTCPLiveness) {
		// Both announced it: TCP watches the agent's end, which needs
		// no heartbeats from us. Its own still come, and still expire c.
		c.StopHeartbeats()
	}
	f.setDirLocked(func() {
		a.conn, a.lastErr = c, ""
		a.hello, a.identity, a.policy, a.addr = hello, id, policy, addr
		a.connectedAt = f.cfg.Now()
	})
	a.pifleet = slices.Contains(hello.Capabilities, transport.CapabilityPifleet)
	f.agentsChangedLocked() // the allowed transition woke WaitAgent before a.conn was set
	var known []*instance
	for inst := range f.core.agentInstances(a.name) {
		if !InstanceTable.IsFinal(inst.m.State()) {
			known = append(known, inst)
		}
	}
	p := f.sessions.projection(a.name)
	f.wg.Add(2) // under f.mu with the state checked: Close cannot be waiting yet
	f.mu.Unlock()
	p.Connected(a.name)

	handle := f.frameHandler(a, c)
	for _, fr := range early {
		handle(fr)
	}
	c.SetHandler(handle)
	f.watchLoss(a, c)
	go func() {
		defer f.wg.Done()
		f.reconcile(a, c, known)
	}()
	return nil
}

// watchLoss handles c's loss once it closes, and closes it when the
// fleet closes. f.wg was added for it. Nothing waits meanwhile: a
// goroutine per idle connection would cost its stack ten thousand times
// over on a big fleet.
func (f *Fleet) watchLoss(a *agentState, c *transport.Conn) {
	stop := context.AfterFunc(f.ctx, func() { _ = c.Close() })
	c.OnClose(func() {
		defer f.wg.Done()
		stop()
		f.connectionLost(a, c)
	})
}

// connectionLost runs once per connection when it closed: the agent goes
// to lost and its idle and running instances to unreachable; requests
// waiting on it fail, and its spawns still waiting for their answers end.
func (f *Fleet) connectionLost(a *agentState, c *transport.Conn) {
	f.mu.Lock()
	if a.conn != c {
		f.mu.Unlock()
		return
	}
	f.setDirLocked(func() { a.conn, a.lostAt = nil, f.cfg.Now() })
	closing := f.state != lifeStarted
	if !closing {
		f.fireConnLocked(a, transport.EventConnectionLost, c.Err())
	}
	for inst := range f.core.agentInstances(a.name) {
		f.stepInstanceLocked(inst, coreInput{Kind: inConnLost})
	}
	for id, w := range a.waiters {
		close(w.ch)
		delete(a.waiters, id)
	}
	// After the waiters: a spawn's caller still waiting learns the
	// outcome decided here.
	f.spawnsLostLocked(a)
	f.execsLostLocked(a)
	p := f.sessions.projection(a.name)
	f.mu.Unlock()
	p.ConnectionLost(a.name)
	if !closing {
		f.dial.Disconnected(a.name)
	}
}

// connFor returns the agent's established connection, or an error naming
// why there is none. op is checked against the agent's trust policy.
func (f *Fleet) connForLocked(name string, op trust.Operation) (*agentState, *transport.Conn, error) {
	if f.state != lifeStarted {
		return nil, nil, ErrClosed
	}
	a := f.agents[name]
	if a == nil {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownAgent, name)
	}
	if !a.established() {
		return a, nil, fmt.Errorf("%w: %s is %s", ErrNotConnected, name, a.m.State())
	}
	if err := trust.Check(a.identity, a.policy, op); err != nil {
		return a, nil, err
	}
	return a, a.conn, nil
}

// request registers a waiter for f's id (minted when empty) and queues f.
// f.mu must be held; the answer arrives on w.ch.
func (f *Fleet) requestLocked(a *agentState, c *transport.Conn, fr transport.Frame, onAnswer func(transport.Frame)) (*waiter, error) {
	h := fr.Envelope()
	if h.ID == "" {
		h.ID = transport.RandomRequestID()
	}
	w := &waiter{onAnswer: onAnswer, ch: make(chan transport.Frame, 1)}
	if err := trySend(c, fr); err != nil {
		return nil, err
	}
	a.waiters[h.ID] = w
	return w, nil
}

// await waits for w's answer.
func await(ctx context.Context, w *waiter) (transport.Frame, error) {
	select {
	case fr, ok := <-w.ch:
		if !ok {
			return nil, fmt.Errorf("%w: connection lost before the answer", ErrNotConnected)
		}
		return fr, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Retry dials the agent now: one that trust refused is eligible again
// (after its policy was changed), and one that is lost is dialled at once
// rather than at the end of its backoff (after its operator restarted
// it). An established agent is left as it is.
func (f *Fleet) Retry(name string) error {
	f.mu.lockAgents()
	a := f.agents[name]
	if a == nil {
		f.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownAgent, name)
	}
	established := a.established()
	if a.m.State() == transport.StateRejected {
		f.setDirLocked(func() { a.m = transport.ConnectionTable.Start() })
		f.agentsChangedLocked()
	}
	f.mu.Unlock()
	if !established {
		// The dialer forgets the target and its backoff, and the new
		// record is dialled at once (after a dial in flight returned).
		f.dial.Deleted(name)
	}
	f.dial.Updated(name)
	f.log.Info().Str("agent", name).Msg("retry: dialling now")
	return nil
}
