package auth

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/transport"
)

func newKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func agentHello() *transport.HelloFrame {
	return &transport.HelloFrame{Machine: "buildbox", Role: transport.RoleAgent, PackageVersion: "v1", Platform: "linux"}
}

func serverHello() *transport.HelloFrame {
	return &transport.HelloFrame{Machine: "orchestrator", Role: transport.RoleServer, PackageVersion: "v1", Platform: "linux",
		Capabilities: []string{transport.CapabilityPifleet}}
}

// pair returns both ends of a real loopback TCP connection: the agent's
// accepted end and the server's dialled end.
func pair(t testing.TB) (agentEnd, serverEnd net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed := make(chan net.Conn, 1)
	go func() {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Error(err)
		}
		dialed <- nc
	}()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s := <-dialed
	t.Cleanup(func() { a.Close(); s.Close() })
	return a, s
}

// server plays a pifleet server on its end: it reads the agent's hello,
// greets with keys, and returns what it read afterwards.
type server struct {
	nc    net.Conn
	br    *bufio.Reader
	hello *transport.HelloFrame // the agent's
	t     Transcript
	sent  *transport.HelloFrame
}

func (s *server) readFrame(t testing.TB) transport.Frame {
	t.Helper()
	rec, err := readRecord(s.br)
	if err != nil {
		t.Fatalf("server read: %v", err)
	}
	f, err := transport.ParseFrame(rec)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func startServer(t testing.TB, nc net.Conn) *server {
	s := &server{nc: nc, br: bufio.NewReader(nc)}
	return s
}

func (s *server) greet(t testing.TB, dir Direction, keys ...ed25519.PrivateKey) {
	t.Helper()
	f := s.readFrame(t)
	h, ok := f.(*transport.HelloFrame)
	if !ok {
		t.Fatalf("agent's first frame is %s", f.FrameType())
	}
	s.hello = h
	s.sent = serverHello()
	s.t, _ = ServerGreeting(s.sent, h, s.nc, dir, keys)
	s.send(t, s.sent)
}

func (s *server) send(t testing.TB, f transport.Frame) {
	t.Helper()
	if err := transport.NewEncoder(s.nc).Encode(f); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	res *AgentResult
	err error
}

func runAgent(nc net.Conn, cfg AgentConfig) <-chan result {
	out := make(chan result, 1)
	if cfg.Hello == nil {
		cfg.Hello = agentHello()
	}
	go func() {
		res, err := AgentHandshake(context.Background(), nc, cfg)
		out <- result{res, err}
	}()
	return out
}

func TestHandshakeProvesServerAndAgent(t *testing.T) {
	a, s := pair(t)
	serverKey, agentKey := newKey(t), newKey(t)
	done := runAgent(a, AgentConfig{TrustedKeys: []ed25519.PublicKey{pub(serverKey)}, Key: agentKey})
	srv := startServer(t, s)
	srv.greet(t, ServerDialed, serverKey)
	f := srv.readFrame(t)
	ap, ok := f.(*transport.AuthProofFrame)
	if !ok {
		t.Fatalf("after the server's proof the agent sent %s, want auth_proof", f.FrameType())
	}
	k, err := VerifyAgent(ap.KeyProof, srv.t)
	if err != nil || !SameKey(k, pub(agentKey)) {
		t.Fatalf("agent proof: %v, %v", k, err)
	}
	// What the server sends after its hello reaches the connection.
	srv.send(t, &transport.ListFrame{Header: transport.Header{ID: "r-1"}})
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !SameKey(r.res.ServerKey, pub(serverKey)) || r.res.V1() || r.res.ServerHello == nil {
		t.Errorf("result %+v", r.res)
	}
	rec, err := transport.NewDecoder(r.res.Conn).Decode()
	if err != nil || rec.FrameType() != transport.TypeList {
		t.Errorf("after the handshake: %v, %v", rec, err)
	}
}

// The agent's challenge must be fresh, and its hello the only thing it
// sends before the proof.
func TestAgentSendsOnlyHelloBeforeProof(t *testing.T) {
	a, s := pair(t)
	done := runAgent(a, AgentConfig{TrustedKeys: []ed25519.PublicKey{pub(newKey(t))}, Timeout: 200 * time.Millisecond, Key: newKey(t)})
	srv := startServer(t, s)
	h := srv.readFrame(t).(*transport.HelloFrame)
	if _, err := ParseChallenge(h.Challenge); err != nil {
		t.Fatalf("hello challenge: %v", err)
	}
	// The server never proves anything: the agent gives up and closes
	// without another byte.
	rest, _ := io.ReadAll(srv.br)
	if len(rest) != 0 {
		t.Errorf("agent sent %q after its hello", rest)
	}
	if r := <-done; !errors.Is(r.err, ErrNoProof) {
		t.Errorf("late proof: %v, want ErrNoProof", r.err)
	}
	// A second connection gets another challenge.
	a2, s2 := pair(t)
	runAgent(a2, AgentConfig{TrustedKeys: []ed25519.PublicKey{pub(newKey(t))}, Timeout: 50 * time.Millisecond})
	h2 := startServer(t, s2).readFrame(t).(*transport.HelloFrame)
	if h2.Challenge == h.Challenge {
		t.Error("two connections got the same challenge")
	}
}

func TestUntrustedKeyRefused(t *testing.T) {
	a, s := pair(t)
	done := runAgent(a, AgentConfig{TrustedKeys: []ed25519.PublicKey{pub(newKey(t))}})
	srv := startServer(t, s)
	srv.greet(t, ServerDialed, newKey(t)) // a valid proof by another key
	if r := <-done; !errors.Is(r.err, ErrUntrustedKey) {
		t.Fatalf("got %v, want ErrUntrustedKey", r.err)
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Error("the agent's end is still open")
	}
}

// A proof recorded on one connection does not open another one.
func TestReplayedProofRefused(t *testing.T) {
	key := newKey(t)
	trusted := []ed25519.PublicKey{pub(key)}
	a1, s1 := pair(t)
	done := runAgent(a1, AgentConfig{TrustedKeys: trusted})
	srv := startServer(t, s1)
	srv.greet(t, ServerDialed, key)
	if r := <-done; r.err != nil {
		t.Fatal(r.err)
	}
	recorded := srv.sent

	a2, s2 := pair(t)
	done = runAgent(a2, AgentConfig{TrustedKeys: trusted})
	srv2 := startServer(t, s2)
	srv2.readFrame(t) // the new hello, with a new challenge
	srv2.send(t, recorded)
	if r := <-done; !errors.Is(r.err, ErrBadProof) {
		t.Fatalf("replayed proof: %v, want ErrBadProof", r.err)
	}
}

// A process that reaches the agent (from the pinned machine) cannot relay
// its challenge through the server's inbound listener: the server signs
// that connection as agent-dialed, with the relay's endpoints, and the
// agent that was dialled refuses it.
func TestRelayedThroughInboundRefused(t *testing.T) {
	key := newKey(t)
	agentEnd, relayToAgent := pair(t)       // the relay dialled the agent
	serverInbound, relayToServer := pair(t) // the relay dialled the server's inbound
	done := runAgent(agentEnd, AgentConfig{TrustedKeys: []ed25519.PublicKey{pub(key)}})
	relay := startServer(t, relayToAgent)
	agentsHello := relay.readFrame(t)
	// The relay forwards the agent's hello to the server's inbound.
	if err := transport.NewEncoder(relayToServer).Encode(agentsHello); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverInbound)
	srv.greet(t, AgentDialed, key)
	// … and the server's greeting back to the agent.
	fromServer := startServer(t, relayToServer).readFrame(t)
	relay.send(t, fromServer)
	if r := <-done; !errors.Is(r.err, ErrBadProof) {
		t.Fatalf("relayed proof: %v, want ErrBadProof", r.err)
	}
	// Even a relay that claims the other direction is caught by the
	// endpoints: the server signs what it sees.
	agentEnd2, relayToAgent2 := pair(t)
	serverSide2, relayToServer2 := pair(t)
	done = runAgent(agentEnd2, AgentConfig{TrustedKeys: []ed25519.PublicKey{pub(key)}})
	relay2 := startServer(t, relayToAgent2)
	transport.NewEncoder(relayToServer2).Encode(relay2.readFrame(t))
	srv2 := startServer(t, serverSide2)
	srv2.greet(t, ServerDialed, key)
	relay2.send(t, startServer(t, relayToServer2).readFrame(t))
	if r := <-done; !errors.Is(r.err, ErrBadProof) {
		t.Fatalf("relayed proof with forged direction: %v, want ErrBadProof", r.err)
	}
}

func TestV1ServerRefusedUnlessAllowed(t *testing.T) {
	first := &transport.ListFrame{Header: transport.Header{ID: "r-1"}}
	a, s := pair(t)
	done := runAgent(a, AgentConfig{TrustedKeys: []ed25519.PublicKey{pub(newKey(t))}})
	srv := startServer(t, s)
	srv.readFrame(t)
	srv.send(t, first)
	r := <-done
	if !errors.Is(r.err, ErrV1Server) || !strings.Contains(r.err.Error(), "--allow-v1-server") {
		t.Fatalf("v1 server: %v, want ErrV1Server naming --allow-v1-server", r.err)
	}

	a, s = pair(t)
	done = runAgent(a, AgentConfig{AllowV1: true})
	srv = startServer(t, s)
	srv.readFrame(t)
	srv.send(t, first)
	r = <-done
	if r.err != nil || !r.res.V1() {
		t.Fatalf("allowed v1 server: %+v, %v", r.res, r.err)
	}
	// The v1 server's first frame is not lost: the connection yields it.
	f, err := transport.NewDecoder(r.res.Conn).Decode()
	if err != nil || f.Envelope().ID != "r-1" {
		t.Errorf("first frame after v1 handshake: %v, %v", f, err)
	}

	// A v1 server that waits for the agent to speak: taken for v1 after V1Wait.
	a, s = pair(t)
	done = runAgent(a, AgentConfig{AllowV1: true, V1Wait: 20 * time.Millisecond})
	startServer(t, s).readFrame(t)
	if r := <-done; r.err != nil || !r.res.V1() {
		t.Fatalf("silent v1 server: %+v, %v", r.res, r.err)
	}
}

// With AllowV1 a pifleet server that proves a key is still checked.
func TestAllowV1StillChecksProvenKeys(t *testing.T) {
	a, s := pair(t)
	done := runAgent(a, AgentConfig{AllowV1: true, TrustedKeys: []ed25519.PublicKey{pub(newKey(t))}})
	startServer(t, s).greet(t, ServerDialed, newKey(t))
	if r := <-done; !errors.Is(r.err, ErrUntrustedKey) {
		t.Fatalf("got %v, want ErrUntrustedKey", r.err)
	}
}

func TestTrustOnFirstUse(t *testing.T) {
	key := newKey(t)
	var learned []ed25519.PublicKey
	a, s := pair(t)
	done := runAgent(a, AgentConfig{TrustOnFirstUse: true, Learn: func(k ed25519.PublicKey) error {
		learned = append(learned, k)
		return nil
	}})
	startServer(t, s).greet(t, ServerDialed, key)
	r := <-done
	if r.err != nil || !r.res.Learned || len(learned) != 1 || !SameKey(learned[0], pub(key)) {
		t.Fatalf("first use: %+v, %v, learned %v", r.res, r.err, learned)
	}
	// Once learned, the key is a trusted key like any other: another is refused.
	a, s = pair(t)
	done = runAgent(a, AgentConfig{TrustOnFirstUse: true, TrustedKeys: learned})
	startServer(t, s).greet(t, ServerDialed, newKey(t))
	if r := <-done; !errors.Is(r.err, ErrUntrustedKey) {
		t.Fatalf("after first use, another key: %v", r.err)
	}
}

// Rotation: the server proves the new and the retired key; an agent that
// trusts either accepts.
func TestRotationProvesBothKeys(t *testing.T) {
	old, cur := newKey(t), newKey(t)
	for _, trusted := range []ed25519.PrivateKey{old, cur} {
		a, s := pair(t)
		done := runAgent(a, AgentConfig{TrustedKeys: []ed25519.PublicKey{pub(trusted)}})
		startServer(t, s).greet(t, ServerDialed, cur, old)
		if r := <-done; r.err != nil || !SameKey(r.res.ServerKey, pub(trusted)) {
			t.Fatalf("trusting one of the two keys: %+v, %v", r.res, r.err)
		}
	}
}

// The agent's proof is bound to its connection too: one recorded on
// another connection, or made for the server role, does not verify.
func TestAgentProofBinding(t *testing.T) {
	k := newKey(t)
	tr := Transcript{Direction: AgentDialed, AgentMachine: "buildbox", AgentChallenge: NewChallenge(),
		ServerChallenge: NewChallenge(), Dialer: "100.64.0.7:40000", Acceptor: "100.64.0.1:9787"}
	p := Sign(k, transport.RoleAgent, tr)
	if _, err := VerifyAgent(p, tr); err != nil {
		t.Fatal(err)
	}
	other := tr
	other.ServerChallenge = NewChallenge()
	if _, err := VerifyAgent(p, other); !errors.Is(err, ErrBadProof) {
		t.Errorf("another connection's transcript: %v", err)
	}
	if _, err := Verify(p, transport.RoleServer, tr); !errors.Is(err, ErrBadProof) {
		t.Errorf("as the server's proof: %v", err)
	}
	other = tr
	other.AgentMachine = "buildbox2"
	if _, err := VerifyAgent(p, other); !errors.Is(err, ErrBadProof) {
		t.Errorf("another machine: %v", err)
	}
	// Substituting the key in the proof breaks it.
	p.Key = FormatPublicKey(pub(newKey(t)))
	if _, err := VerifyAgent(p, tr); !errors.Is(err, ErrBadProof) {
		t.Errorf("substituted key: %v", err)
	}
}

func TestCanceledContextEndsHandshake(t *testing.T) {
	a, s := pair(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan error, 1)
	go func() {
		_, err := AgentHandshake(ctx, a, AgentConfig{Hello: agentHello(), TrustedKeys: []ed25519.PublicKey{pub(newKey(t))}})
		out <- err
	}()
	startServer(t, s).readFrame(t)
	cancel()
	if err := <-out; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want Canceled", err)
	}
}
