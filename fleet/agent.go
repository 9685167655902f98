package fleet

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
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
	// spawning maps a spawn request id to its instance until spawned.
	spawning map[string]*instance
	orphans  map[string][]*transport.EventFrame
	// execs are the commands started on this connection, by exec id,
	// until their exit.
	execs map[string]*Execution
	// catchUp serialises the agent's session catch-ups (seed §9: one
	// catch_up at a time per projection).
	catchUp sync.Mutex
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

// ---- the dialer's directory ----

// directory is the fleet's agents as the dialer sees them. It reads
// under dirMu alone: the dialer never waits for the fleet lock.
type directory struct{ f *Fleet }

func (d directory) Targets() []string {
	d.f.dirMu.Lock()
	defer d.f.dirMu.Unlock()
	out := make([]string, 0, len(d.f.agents))
	for name, a := range d.f.agents {
		if len(a.addrs) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (d directory) Eligible(id string) bool {
	d.f.dirMu.Lock()
	defer d.f.dirMu.Unlock()
	a := d.f.agents[id]
	if a == nil || d.f.state != lifeStarted {
		return false
	}
	s := a.m.State()
	return s != transport.StateRejected && s != transport.StateClosed
}

func (d directory) Addresses(id string) []string {
	d.f.dirMu.Lock()
	defer d.f.dirMu.Unlock()
	if a := d.f.agents[id]; a != nil {
		return slices.Clone(a.addrs)
	}
	return nil
}

func (d directory) Connected(id string) bool {
	d.f.dirMu.Lock()
	defer d.f.dirMu.Unlock()
	a := d.f.agents[id]
	return a != nil && a.established()
}

// dialAgent is the dialer's DialFunc: dial, wait for the hello, identify
// and trust the agent, then establish the connection. On success the
// directory reports the connection before it returns.
func (f *Fleet) dialAgent(ctx context.Context, name, addr string) error {
	f.mu.Lock()
	a := f.agents[name]
	if a == nil || f.state != lifeStarted {
		f.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownAgent, name)
	}
	if a.established() {
		f.mu.Unlock()
		return nil // it dialled in meanwhile
	}
	if a.m.State() == transport.StateLost {
		f.fireConnLocked(a, transport.EventRetry, nil)
	}
	if a.m.State() != transport.StateConnecting {
		st := a.m.State()
		f.mu.Unlock()
		return fmt.Errorf("fleet: agent %s is %s", name, st)
	}
	f.mu.Unlock()

	dctx, cancel := context.WithTimeout(ctx, f.cfg.ConnectTimeout)
	nc, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	cancel()
	f.mu.Lock()
	if f.state != lifeStarted {
		// Close moved the machine to closed meanwhile: nothing to report.
		f.mu.Unlock()
		if nc != nil {
			nc.Close()
		}
		return ErrClosed
	}
	if err != nil {
		f.fireConnLocked(a, transport.EventDialFailed, err)
		f.mu.Unlock()
		return err
	}
	f.fireConnLocked(a, transport.EventTCPEstablished, nil)
	f.mu.Unlock()
	c := transport.NewConn(nc, f.connOptions(name))
	hctx, hcancel := context.WithTimeout(ctx, f.cfg.HelloTimeout)
	defer hcancel()
	hello, early, err := f.awaitHello(hctx, c)
	if err != nil {
		return f.handshakeFailed(a, c, err)
	}
	remote := transport.RemoteAddrPort(nc)
	id := identity.Identity{Machine: hello.Machine}
	if f.cfg.Whois != nil {
		id, err = f.cfg.Whois.Whois(hctx, remote.Addr())
		if err != nil {
			return f.handshakeFailed(a, c, &trust.RefusedError{Remote: remote, Err: err})
		}
		if id.Machine != name {
			// The address answered for another machine: never command
			// it under this name.
			return f.handshakeFailed(a, c, &trust.RefusedError{Remote: remote, Identity: id,
				Err: fmt.Errorf("%w: dialled %s for agent %q, but whois says it is %q", ErrWrongMachine, addr, name, id.Machine)})
		}
	} else if !remote.Addr().IsLoopback() {
		// hello.machine is only a claim: without whois it is believed on
		// loopback alone.
		return f.handshakeFailed(a, c, &trust.RefusedError{Remote: remote, Identity: id,
			Err: fmt.Errorf("%w: no Whois to identify %s (only loopback agents are known by their hello)", ErrWrongMachine, remote.Addr())})
	}
	policy, err := f.trust.Decide(hctx, id)
	if err == nil && policy == trust.Deny {
		err = trust.ErrDenied
	}
	if err != nil {
		return f.handshakeFailed(a, c, &trust.RefusedError{Remote: remote, Identity: id, Err: err})
	}
	if t, ok := f.greet(c, hello, auth.ServerDialed); ok {
		// A pifleet agent answers our proof with its own once it accepted
		// it: until then it is not connected (it may refuse our key).
		_, more, err := f.awaitAgentProof(hctx, c, t)
		if err != nil {
			return f.handshakeFailed(a, c, fmt.Errorf("fleet: agent %s did not accept the server's key proof: %w", name, err))
		}
		early = append(early, more...)
	}
	return f.establish(a, c, addr, hello, early, id, policy)
}

// handshakeFailed closes c and moves a to lost (retried) or rejected
// (trust refused it: never retried until its policy changes).
func (f *Fleet) handshakeFailed(a *agentState, c *transport.Conn, err error) error {
	_ = c.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state != lifeStarted {
		return ErrClosed // Close cut the handshake short and closed the machine
	}
	if errors.Is(err, trust.ErrRefused) {
		f.log.Warn().Str("agent", a.name).Err(err).
			Msg("agent refused by trust; it is not dialled again until its policy is set (pifleet-server trust set NAME POLICY) and it is retried")
		f.fireConnLocked(a, transport.EventDenied, err)
	} else {
		f.fireConnLocked(a, transport.EventHandshakeFailed, err)
	}
	return err
}

func (f *Fleet) connOptions(name string) transport.Options {
	o := f.cfg.Conn
	o.Logger = f.cfg.Logger.With().Str("agent", name).Logger()
	return o
}

// awaitHello reads frames until the agent's hello; frames before it are
// kept and handled once the connection is established.
func (f *Fleet) awaitHello(ctx context.Context, c *transport.Conn) (*transport.HelloFrame, []transport.Frame, error) {
	var early []transport.Frame
	for {
		fr, err := c.Receive(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("fleet: waiting for hello: %w", err)
		}
		if h, ok := fr.(*transport.HelloFrame); ok {
			return h, early, nil
		}
		if len(early) < maxOrphans {
			early = append(early, fr)
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
		PackageVersion: Version, Platform: hostPlatform(), Capabilities: serverCapabilities})
	f.setDirLocked(func() { a.conn, a.lastErr = c, "" })
	a.hello, a.identity, a.policy, a.addr = hello, id, policy, addr
	a.pifleet = slices.Contains(hello.Capabilities, transport.CapabilityPifleet)
	a.connectedAt = f.cfg.Now()
	f.agentsChangedLocked() // the allowed transition woke WaitAgent before a.conn was set
	var known []*instance
	for _, inst := range f.byAgent[a.name] {
		if !InstanceTable.IsFinal(inst.m.State()) {
			known = append(known, inst)
		}
	}
	p := f.projectionLocked(a.name)
	f.wg.Add(2) // under f.mu with the state checked: Close cannot be waiting yet
	f.mu.Unlock()
	p.Connected(a.name)

	handle := f.frameHandler(a, c)
	for _, fr := range early {
		handle(fr)
	}
	c.SetHandler(handle)
	go f.watchLoss(a, c)
	go func() {
		defer f.wg.Done()
		f.reconcile(a, c, known)
	}()
	return nil
}

// watchLoss waits until c closes (or closes it when the fleet closes),
// then handles its loss. f.wg was added for it.
func (f *Fleet) watchLoss(a *agentState, c *transport.Conn) {
	defer f.wg.Done()
	select {
	case <-c.Done():
	case <-f.ctx.Done():
		_ = c.Close()
		<-c.Done()
	}
	f.connectionLost(a, c)
}

// connectionLost runs once per connection when it closed: the agent goes
// to lost and its idle and running instances to unreachable; requests
// waiting on it fail.
func (f *Fleet) connectionLost(a *agentState, c *transport.Conn) {
	f.mu.Lock()
	if a.conn != c {
		f.mu.Unlock()
		return
	}
	f.setDirLocked(func() { a.conn = nil })
	a.lostAt = f.cfg.Now()
	closing := f.state != lifeStarted
	if !closing {
		f.fireConnLocked(a, transport.EventConnectionLost, c.Err())
	}
	for _, inst := range f.byAgent[a.name] {
		f.stepInstanceLocked(inst, coreInput{Kind: inConnLost})
	}
	for id, w := range a.waiters {
		close(w.ch)
		delete(a.waiters, id)
	}
	f.execsLostLocked(a)
	p := f.projectionLocked(a.name)
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

// ---- inbound agents ----

func (f *Fleet) startInbound() error {
	ln, err := net.Listen("tcp", f.cfg.InboundListen)
	if err != nil {
		return fmt.Errorf("fleet: inbound listener: %w", err)
	}
	f.ends.addInbound(ln)
	var admitted sync.Map // remote AddrPort → identity
	srv := &transport.Server{
		Gate: func(ctx context.Context, remote netip.AddrPort) error {
			id, err := f.inboundGate(ctx, remote)
			if err != nil {
				return err
			}
			admitted.Store(remote, id)
			return nil
		},
		Options: f.connOptions("inbound"),
		Logger:  f.log,
		Handle: func(c *transport.Conn) {
			// Tracked by f.wg only while the fleet runs, so that Close
			// (which changes the state under f.mu before waiting) never
			// races an Add.
			f.mu.Lock()
			if f.state != lifeStarted {
				f.mu.Unlock()
				_ = c.Close()
				return
			}
			f.wg.Add(1)
			f.mu.Unlock()
			defer f.wg.Done()
			remote := transport.RemoteAddrPort(c.NetConn())
			v, ok := admitted.LoadAndDelete(remote)
			if !ok {
				_ = c.Close()
				return
			}
			f.acceptInbound(c, remote, v.(identity.Identity))
		},
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := srv.Serve(f.ctx, ln); err != nil {
			f.log.Error().Err(err).Msg("inbound listener stopped")
		}
	}()
	return nil
}

// InboundAddr returns the address agents dial in at ("" without
// Config.InboundListen, or before Start).
func (f *Fleet) InboundAddr() string { return f.ends.inbound() }

// inboundGate runs before a byte is sent to an agent that dials in: who
// is it (whois), and is its machine denied already (refused at once, as
// every time it dials). Anyone else goes on to the key handshake, and
// trust decides once the agent proved its key (acceptInbound).
func (f *Fleet) inboundGate(ctx context.Context, remote netip.AddrPort) (identity.Identity, error) {
	id, err := f.cfg.Whois.Whois(ctx, remote.Addr())
	if err != nil {
		f.log.Warn().Stringer("remote", remote).Err(err).Msg("refused: whois failed")
		return identity.Identity{}, &trust.RefusedError{Remote: remote, Err: err}
	}
	if d, ok, err := f.trust.Get(id.Machine); err == nil && ok && d.Policy == trust.Deny && (d.User == "" || d.User == id.User) {
		f.log.Warn().Stringer("remote", remote).Str("machine", id.Machine).Str("user", id.User).Msg("refused")
		return id, &trust.RefusedError{Remote: remote, Identity: id, Err: trust.ErrDenied}
	}
	return id, nil
}

// acceptInbound establishes an agent that dialled in; it is known by its
// whois machine name. It must prove its key over this connection (the
// auth_proof that answers the server's hello), and trust decides for that
// machine and key: a new machine, or a known one with another key or
// owner, is a first contact.
func (f *Fleet) acceptInbound(c *transport.Conn, remote netip.AddrPort, id identity.Identity) {
	ctx, cancel := context.WithTimeout(f.ctx, f.cfg.HelloTimeout)
	defer cancel()
	refuse := func(err error, msg string) {
		_ = c.Close()
		f.log.Warn().Err(err).Str("remote", remote.String()).Str("machine", id.Machine).Str("user", id.User).Msg(msg)
	}
	hello, early, err := f.awaitHello(ctx, c)
	if err != nil {
		refuse(err, "inbound agent sent no hello")
		return
	}
	t, ok := f.greet(c, hello, auth.AgentDialed)
	if !ok {
		refuse(auth.ErrBadChallenge, "refused: an agent that dials in must prove its key (its hello has no challenge)")
		return
	}
	key, more, err := f.awaitAgentProof(ctx, c, t)
	if err != nil {
		refuse(err, "refused: the agent did not prove its key")
		return
	}
	early = append(early, more...)
	// The question may wait for an operator: bounded by the connection,
	// not by the hello timeout.
	dctx, dcancel := context.WithCancel(f.ctx)
	defer dcancel()
	go func() {
		select {
		case <-c.Done():
			dcancel()
		case <-dctx.Done():
		}
	}()
	policy, err := f.trust.DecideKey(dctx, id, auth.FormatPublicKey(key))
	if err == nil && policy == trust.Deny {
		err = trust.ErrDenied
	}
	if err != nil {
		refuse(err, "refused")
		return
	}
	f.mu.Lock()
	a := f.agents[id.Machine]
	if a == nil {
		a = newAgentState(id.Machine, nil, sourceInbound)
		f.setDirLocked(func() { f.agents[id.Machine] = a })
	}
	if a.established() {
		f.mu.Unlock()
		_ = c.Close()
		f.log.Warn().Str("agent", id.Machine).Msg("inbound connection while one is established; closed")
		return
	}
	switch a.m.State() {
	case transport.StateRejected, transport.StateClosed:
		f.setDirLocked(func() { a.m = transport.ConnectionTable.Start() }) // trust admitted it again
	case transport.StateLost:
		f.fireConnLocked(a, transport.EventRetry, nil)
	}
	if a.m.State() == transport.StateConnecting {
		f.fireConnLocked(a, transport.EventTCPEstablished, nil)
	}
	f.mu.Unlock()
	if err := f.establish(a, c, remote.String(), hello, early, id, policy); err == nil {
		f.dial.Connected(a.name)
	}
}

// awaitAgentProof reads frames until the agent's auth_proof and checks it
// over t; frames before it are kept for the connection's handler.
func (f *Fleet) awaitAgentProof(ctx context.Context, c *transport.Conn, t auth.Transcript) (ed25519.PublicKey, []transport.Frame, error) {
	var early []transport.Frame
	for {
		fr, err := c.Receive(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("fleet: waiting for the agent's proof: %w", err)
		}
		if p, ok := fr.(*transport.AuthProofFrame); ok {
			key, err := auth.VerifyAgent(p.KeyProof, t)
			return key, early, err
		}
		if len(early) < maxOrphans {
			early = append(early, fr)
		}
	}
}

// Retry dials the agent now: one that trust refused is eligible again
// (after its policy was changed), and one that is lost is dialled at once
// rather than at the end of its backoff (after its operator restarted
// it). An established agent is left as it is.
func (f *Fleet) Retry(name string) error {
	f.mu.Lock()
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

// ---- tailnet discovery ----

func (f *Fleet) discoverTailnet() {
	defer f.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(f.ctx, identity.DefaultTimeout)
		st, err := f.cfg.Tailnet.Status(ctx)
		cancel()
		if err != nil {
			f.log.Warn().Err(err).Msg("tailnet discovery")
		} else {
			f.addTailnetPeers(st)
		}
		t.Reset(f.cfg.TailnetInterval)
	}
}

func (f *Fleet) addTailnetPeers(st identity.Status) {
	var changed []string
	f.mu.Lock()
	for _, p := range st.Peers {
		ip, ok := p.IPv4()
		name := p.Machine()
		if !ok || !p.Online || name == "" {
			continue
		}
		addr := netip.AddrPortFrom(ip, uint16(f.cfg.TailnetPort)).String()
		a := f.agents[name]
		switch {
		case a == nil:
			f.setDirLocked(func() { f.agents[name] = newAgentState(name, []string{addr}, sourceTailnet) })
			f.agentsChangedLocked()
		case a.source == sourceTailnet || a.source == sourceRestored:
			if slices.Equal(a.addrs, []string{addr}) {
				continue
			}
			f.setDirLocked(func() { a.addrs, a.source = []string{addr}, sourceTailnet })
		default:
			continue // the static directory wins
		}
		changed = append(changed, name)
	}
	f.mu.Unlock()
	for _, name := range changed {
		f.dial.Updated(name)
	}
}
