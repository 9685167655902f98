package agent

import (
	"context"
	"errors"
	"net"
	"time"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
)

// DialHandshakeTimeout bounds the wait for the server's hello on a
// connection the agent dialled. A server asks about a machine it has never
// seen before it answers, so this is longer than an accepted connection's
// gate.
const DialHandshakeTimeout = 30 * time.Second

// dialServer keeps a connection to a server's inbound address until ctx
// ends: the connection lifecycle of transport.Redialer (redial after 1 s,
// 2 s, 4 s … 30 s, back to 1 s once connected). Every connection passes
// the same gate and greeting as an accepted one (setup); the pinned server
// alone gets a byte, and a refusal on either side is retried on the same
// schedule, since a trust decision or an address can change meanwhile.
func (a *Agent) dialServer(ctx context.Context, addr string) {
	log := a.log.With().Str("server", addr).Logger()
	d := net.Dialer{}
	if a.cfg.DialFrom.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: a.cfg.DialFrom.AsSlice()}
	}
	var (
		id      identity.Identity // of the connection being set up
		pending *peer             // greeted, not yet handed to handle
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
		Authenticate: func(ctx context.Context, c *transport.Conn) error {
			p := a.newPeer(c, id)
			if err := a.greet(ctx, p, true); err != nil {
				return err
			}
			pending = p
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
