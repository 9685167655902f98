package fleet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

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
			f.mu.lockAgents()
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
	cancelOnClose(dctx, dcancel, c)
	policy, err := f.trust.DecideKey(dctx, id, auth.FormatPublicKey(key))
	if err == nil && policy == trust.Deny {
		err = trust.ErrDenied
	}
	if err != nil {
		refuse(err, "refused")
		return
	}
	f.mu.lockAgents()
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
