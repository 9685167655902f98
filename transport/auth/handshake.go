package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"example.com/pifleet/transport"
)

// Defaults of AgentConfig.
const (
	DefaultTimeout = 10 * time.Second
	DefaultV1Wait  = 2 * time.Second
)

// ErrV1Server: the server sent no proof and the agent does not accept
// servers without one. The message names the flag that would.
var ErrV1Server = errors.New("auth: a server without a key proof is refused")

// AgentConfig configures the agent's side of the handshake.
type AgentConfig struct {
	// Hello is the agent's hello; AgentHandshake sets its Challenge.
	Hello *transport.HelloFrame
	// Key is the agent's own key, proven when the server's hello asks for
	// it (carries a challenge). nil: never proven.
	Key ed25519.PrivateKey
	// TrustedKeys are the server keys the agent obeys.
	TrustedKeys []ed25519.PublicKey
	// TrustOnFirstUse, with no TrustedKeys, accepts the first key a server
	// proves and hands it to Learn, which must store it before it
	// returns: from then on it is a trusted key.
	TrustOnFirstUse bool
	Learn           func(ed25519.PublicKey) error
	// AllowV1 accepts a server that proves nothing (the TypeScript
	// pi-fleet): one whose first frame is not a hello, or that sends
	// nothing within V1Wait.
	AllowV1 bool
	// V1Wait bounds, with AllowV1, the wait for the server's hello
	// (default 2 s).
	V1Wait time.Duration
	// Timeout bounds the wait for the server's proof (default 10 s).
	Timeout time.Duration
	// Dialed says that the agent opened the connection (it dials in).
	Dialed bool
	// Proxied says that the agent is reached through a TCP proxy or NAT:
	// the two sides see different TCP endpoints, so the proofs cannot
	// cover them. Whoever runs the proxy can then relay a handshake.
	Proxied bool
}

// AgentResult is an authenticated connection.
type AgentResult struct {
	// Conn is the connection to run transport.NewConn on: it yields what
	// the server sent after its hello (or, from a v1 server, everything
	// it sent).
	Conn net.Conn
	// ServerHello is the server's hello (nil from a server that sent
	// none).
	ServerHello *transport.HelloFrame
	// ServerKey is the key the server proved (nil from a v1 server).
	ServerKey ed25519.PublicKey
	// Learned says that ServerKey was trusted on first use just now.
	Learned bool
}

// V1 says that the server proved nothing (accepted under AllowV1).
func (r *AgentResult) V1() bool { return r.ServerKey == nil }

// AgentHandshake runs the agent's side on a fresh connection: it sends
// the agent's hello with a new challenge and then reads nothing but the
// server's hello, which must prove a trusted key over this connection's
// transcript. Until then nothing else is sent or processed. On success,
// when the server's hello carries a challenge and cfg.Key is set, the
// agent's own proof (auth_proof) is sent. On failure nc is closed and the
// error says why (ErrNoProof, ErrBadProof, ErrUntrustedKey, ErrV1Server,
// ErrBadChallenge).
func AgentHandshake(ctx context.Context, nc net.Conn, cfg AgentConfig) (*AgentResult, error) {
	res, err := agentHandshake(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return res, nil
}

func agentHandshake(ctx context.Context, nc net.Conn, cfg AgentConfig) (*AgentResult, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.V1Wait <= 0 {
		cfg.V1Wait = DefaultV1Wait
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true) // transport.NewConn cannot see through the wrapper below
	}
	// ctx ending unblocks the reads and writes below.
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	challenge := NewChallenge()
	hello := *cfg.Hello
	hello.Challenge = EncodeChallenge(challenge)
	hello.Proxied = cfg.Proxied
	line, err := transport.MarshalFrame(&hello)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	nc.SetWriteDeadline(start.Add(cfg.Timeout))
	if _, err := nc.Write(line); err != nil {
		return nil, fmt.Errorf("auth: sending hello: %w", err)
	}
	wait := cfg.Timeout
	if cfg.AllowV1 {
		wait = min(cfg.V1Wait, cfg.Timeout)
	}
	nc.SetReadDeadline(start.Add(wait))
	br := bufio.NewReaderSize(nc, 64<<10)
	rec, err := readRecord(br)
	if err != nil {
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil
		switch {
		case timeout && cfg.AllowV1:
			return v1(nc, br, nil)
		case timeout:
			return nil, fmt.Errorf("%w within %s", ErrNoProof, cfg.Timeout)
		case ctx.Err() != nil:
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("auth: waiting for the server's proof: %w", err)
	}
	f, err := transport.ParseFrame(rec)
	if err != nil {
		return nil, fmt.Errorf("%w: the server's first frame does not parse: %v", ErrNoProof, err)
	}
	sh, ok := f.(*transport.HelloFrame)
	if !ok || sh.Role != transport.RoleServer || len(sh.Proofs) == 0 {
		what := "a " + f.FrameType() + " frame"
		if ok {
			what = "a hello without a key proof"
		}
		if cfg.AllowV1 {
			if ok { // a server hello without proof: its capabilities still count
				res, err := v1(nc, br, nil)
				if res != nil {
					res.ServerHello = sh
				}
				return res, err
			}
			return v1(nc, br, rec)
		}
		return nil, fmt.Errorf("%w: the server sent %s first (a TypeScript pi-fleet server? start the agent with --allow-v1-server to accept one)", ErrV1Server, what)
	}
	serverChallenge, err := ParseChallenge(sh.Challenge)
	if err != nil {
		return nil, fmt.Errorf("server hello: %w", err)
	}
	dialer, acceptor := Endpoints(nc, cfg.Dialed)
	dir := ServerDialed
	if cfg.Dialed {
		dir = AgentDialed
	}
	t := Transcript{Direction: dir, AgentMachine: hello.Machine, AgentChallenge: challenge,
		ServerChallenge: serverChallenge, Dialer: dialer, Acceptor: acceptor, Proxied: cfg.Proxied}
	res := &AgentResult{ServerHello: sh}
	if len(cfg.TrustedKeys) == 0 && cfg.TrustOnFirstUse {
		key, err := Verify(sh.Proofs[0], transport.RoleServer, t)
		if err != nil {
			return nil, err
		}
		if cfg.Learn != nil {
			if err := cfg.Learn(key); err != nil {
				return nil, fmt.Errorf("auth: storing the server key trusted on first use: %w", err)
			}
		}
		res.ServerKey, res.Learned = key, true
	} else {
		key, err := VerifyTrusted(sh.Proofs, transport.RoleServer, t, cfg.TrustedKeys)
		if err != nil {
			return nil, err
		}
		res.ServerKey = key
	}
	if cfg.Key != nil {
		p := Sign(cfg.Key, transport.RoleAgent, t)
		line, err := transport.MarshalFrame(&transport.AuthProofFrame{KeyProof: p})
		if err != nil {
			return nil, err
		}
		if _, err := nc.Write(line); err != nil {
			return nil, fmt.Errorf("auth: sending the agent's proof: %w", err)
		}
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	res.Conn = withPending(nc, br, nil)
	return res, nil
}

// v1 hands back a connection to a server that proved nothing; first is
// its first record (nil when none was read or it was consumed).
func v1(nc net.Conn, br *bufio.Reader, first []byte) (*AgentResult, error) {
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return &AgentResult{Conn: withPending(nc, br, first)}, nil
}

// readRecord reads one LF-terminated record of at most MaxFrameBytes.
func readRecord(br *bufio.Reader) ([]byte, error) {
	var rec []byte
	for {
		chunk, err := br.ReadSlice('\n')
		rec = append(rec, chunk...)
		if len(rec) > transport.MaxFrameBytes+1 {
			return nil, fmt.Errorf("%w: the server's first frame is over %d bytes", ErrNoProof, transport.MaxFrameBytes)
		}
		switch {
		case err == nil:
			rec = rec[:len(rec)-1]
			if len(bytes.TrimSpace(rec)) == 0 {
				rec = rec[:0]
				continue // blank lines are skipped, as the decoder does
			}
			return rec, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}

// withPending returns nc, or a wrapper that first yields first (with its
// LF) and the bytes br holds.
func withPending(nc net.Conn, br *bufio.Reader, first []byte) net.Conn {
	var pending []byte
	if first != nil {
		pending = append(slices.Clip(first), '\n')
	}
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		pending = append(pending, b...)
	}
	if len(pending) == 0 {
		return nc
	}
	return &pendingConn{Conn: nc, pending: pending}
}

// pendingConn is a net.Conn whose first reads return bytes read ahead.
type pendingConn struct {
	net.Conn
	pending []byte
}

// NetConn returns the connection under the read-ahead, for its socket
// options (transport.Conn.WatchTCP).
func (c *pendingConn) NetConn() net.Conn { return c.Conn }

func (c *pendingConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// ServerGreeting fills hello, the server's, with a fresh challenge and one
// proof per key over the transcript of nc, given the agent's hello. It
// returns the transcript, against which the agent's auth_proof is
// checked (VerifyAgent). An agent hello without a challenge (a TypeScript
// agent) gets no proofs and ok is false: there is nothing to sign.
func ServerGreeting(hello, agent *transport.HelloFrame, nc net.Conn, dir Direction, keys []ed25519.PrivateKey) (t Transcript, ok bool) {
	serverChallenge := NewChallenge()
	hello.Challenge = EncodeChallenge(serverChallenge)
	hello.Proofs = nil
	agentChallenge, err := ParseChallenge(agent.Challenge)
	if err != nil {
		return Transcript{}, false
	}
	dialer, acceptor := Endpoints(nc, dir == ServerDialed)
	t = Transcript{Direction: dir, AgentMachine: agent.Machine, AgentChallenge: agentChallenge,
		ServerChallenge: serverChallenge, Dialer: dialer, Acceptor: acceptor, Proxied: agent.Proxied}
	for _, k := range keys {
		hello.Proofs = append(hello.Proofs, Sign(k, transport.RoleServer, t))
	}
	return t, true
}

// VerifyAgent checks an agent's auth_proof over t and returns its key.
func VerifyAgent(p transport.KeyProof, t Transcript) (ed25519.PublicKey, error) {
	return Verify(p, transport.RoleAgent, t)
}
