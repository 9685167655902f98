package agent

import (
	"context"
	"errors"
	"net"
	"time"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
)

// DialHandshakeTimeout bounds a dialled connection's key handshake.
const DialHandshakeTimeout = 30 * time.Second

// dialServer keeps a connection to a server's inbound address until ctx
// ends: the connection lifecycle of transport.Redialer (redial after 1 s,
// 2 s, 4 s … 30 s, back to 1 s once connected). Every connection passes
// the same gate and key handshake as an accepted one (gate,
// authenticate); the pinned server alone gets a byte, and a refusal on
// either side is retried on the same schedule, since a trust decision or
// an address can change meanwhile. The server decides whether it trusts
// this agent (first contact) after the handshake: until then the frames
// the agent sends wait in the connection.
func (a *Agent) dialServer(ctx context.Context, addr string) {
	log := a.log.With().Str("server", addr).Logger()
	d := net.Dialer{}
	if a.cfg.DialFrom.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: a.cfg.DialFrom.AsSlice()}
	}
	var (
		id      identity.Identity // of the connection being set up
		res     *auth.AgentResult // its handshake
		pending *peer             // authenticated, not yet handed to handle
	)
	r := transport.NewRedialer(transport.RedialConfig{
		Dial: func(ctx context.Context) (net.Conn, error) {
			nc, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			if id, err = a.gate(ctx, nc); err != nil {
				log.Warn().Err(err).Msg("refusing the server at this address")
				return nil, err
			}
			return nc, nil
		},
		Handshake: func(ctx context.Context, nc net.Conn) (net.Conn, error) {
			var err error
			if res, err = a.authenticate(ctx, nc, id, true); err != nil {
				return nil, err
			}
			return res.Conn, nil
		},
		Authenticate: func(ctx context.Context, c *transport.Conn) error {
			pending = a.newPeer(c, id, res)
			return nil
		},
		HandshakeTimeout: DialHandshakeTimeout,
		RetryMin:         a.cfg.DialRetryMin,
		RetryMax:         a.cfg.DialRetryMax,
		Conn:             a.connOptions(),
		OnTransition: func(t transport.Transition) {
			if t.To == transport.StateEstablished && t.Conn != nil && pending != nil {
				p := pending
				pending = nil
				a.wg.Go(func() { a.handle(ctx, p) })
			}
		},
		Logger: log,
	})
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("stopped dialling the server")
	}
}
