package fleet

import (
	"crypto/ed25519"
	"slices"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
)

// Files of the server's state directory.
const (
	// KeyFile is the server's key file (mode 0600).
	KeyFile = "server.key"
	// StateFile is the server's database.
	StateFile = serverstore.FileName
)

// PublicKey returns the server's current public key: the key agents are
// given (`pifleet-agent serve --server-key`).
func (f *Fleet) PublicKey() ed25519.PublicKey {
	return f.keyRing().Public()
}

// keyRing reads the key file again (a rotation takes effect at the next
// handshake, without a restart); when it cannot be read, the last ring
// read stays in use and the failure is logged.
func (f *Fleet) keyRing() *auth.KeyRing {
	r, err := auth.ReadKeyRing(f.cfg.KeyFile)
	f.keysMu.Lock()
	defer f.keysMu.Unlock()
	if err != nil {
		f.log.Error().Err(err).Msg("server key file unreadable; proving the keys read before")
		return f.keys
	}
	f.keys = r
	return r
}

// greet sends the server's hello on c, answering the agent's hello: a
// fresh challenge, and a proof per active key over c's transcript. It
// returns the transcript, for the agent's own proof; ok is false when the
// agent's hello had no challenge (a TypeScript agent: nothing to sign).
func (f *Fleet) greet(c *transport.Conn, agentHello *transport.HelloFrame, dir auth.Direction) (auth.Transcript, bool) {
	hello := &transport.HelloFrame{Machine: "pifleet-server", Role: transport.RoleServer,
		PackageVersion: Version, Platform: hostPlatform(), Capabilities: f.capabilities()}
	t, ok := auth.ServerGreeting(hello, agentHello, c.NetConn(), dir, f.keyRing().Active(f.cfg.Now()))
	_ = c.TrySend(hello)
	return t, ok
}

// capabilities is what the server's hello announces: serverCapabilities,
// event-coalesce unless Config.EveryUpdate, and tcp-liveness unless
// Config.NoTCPLiveness.
func (f *Fleet) capabilities() []string {
	caps := slices.Clip(serverCapabilities)
	if !f.cfg.EveryUpdate {
		caps = append(caps, transport.CapabilityEventCoalesce)
	}
	if !f.cfg.NoTCPLiveness {
		caps = append(caps, transport.CapabilityTCPLiveness)
	}
	return caps
}
