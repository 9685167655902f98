package fleet

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"slices"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

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
	f.mu.lockAgents()
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
	f.mu.lockAgents()
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
	f.mu.lockAgents()
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
	return awaitFrame[*transport.HelloFrame](ctx, c, "hello")
}

// awaitAgentProof reads frames until the agent's auth_proof and checks it
// over t; frames before it are kept for the connection's handler.
func (f *Fleet) awaitAgentProof(ctx context.Context, c *transport.Conn, t auth.Transcript) (ed25519.PublicKey, []transport.Frame, error) {
	p, early, err := awaitFrame[*transport.AuthProofFrame](ctx, c, "the agent's proof")
	if err != nil {
		return nil, nil, err
	}
	key, err := auth.VerifyAgent(p.KeyProof, t)
	return key, early, err
}

// awaitFrame reads frames until one of type T (what names it in the
// error). The frames before it, up to maxOrphans, are returned for the
// connection's handler: an agent may send before the handshake is done.
func awaitFrame[T transport.Frame](ctx context.Context, c *transport.Conn, what string) (T, []transport.Frame, error) {
	var early []transport.Frame
	for {
		fr, err := c.Receive(ctx)
		if err != nil {
			var none T
			return none, nil, fmt.Errorf("fleet: waiting for %s: %w", what, err)
		}
		if want, ok := fr.(T); ok {
			return want, early, nil
		}
		if len(early) < maxOrphans {
			early = append(early, fr)
		}
	}
}

// cancelOnClose calls cancel when c closes before ctx ends: what waits
// under ctx (a trust question, a reconcile) is for this connection only.
// The caller's own cancel ends the watch.
func cancelOnClose(ctx context.Context, cancel context.CancelFunc, c *transport.Conn) {
	go func() {
		select {
		case <-c.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
}
