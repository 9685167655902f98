//go:build unix

package agent

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// serverListener is where the test plays a server that agents dial in to.
type serverListener struct {
	t  *testing.T
	ln net.Listener
}

func listenAsServer(t *testing.T) *serverListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &serverListener{t: t, ln: ln}
}

// accept waits for the agent's next connection.
func (s *serverListener) accept() net.Conn {
	s.t.Helper()
	type res struct {
		nc  net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		nc, err := s.ln.Accept()
		ch <- res{nc, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			s.t.Fatal(r.err)
		}
		s.t.Cleanup(func() { r.nc.Close() })
		return r.nc
	case <-time.After(waitLimit):
		s.ln.Close()
		s.t.Fatal("the agent never dialled")
		return nil
	}
}

// dialling runs an agent that keeps a connection to s, redialling
// quickly.
func dialling(t *testing.T, s *serverListener, static string) *harness {
	return newHarness(t, hopts{static: static, mod: func(c *Config) {
		c.Dial = []string{s.ln.Addr().String()}
		c.DialFrom = netip.MustParseAddr("127.0.0.1")
		c.DialRetryMin, c.DialRetryMax = 5*time.Millisecond, 20*time.Millisecond
	}})
}

// A server that is not the pinned one gets no byte from an agent that
// dials it, however often the agent tries again.
func TestDialRefusesAServerThatIsNotPinned(t *testing.T) {
	s := listenAsServer(t)
	dialling(t, s, "127.0.0.1=intruder")
	for range 2 { // the second connection is the redial
		nc := s.accept()
		if n, _ := io.Copy(io.Discard, nc); n != 0 {
			t.Fatalf("a server that is not pinned received %d bytes", n)
		}
	}
}

// The pinned server that the agent dialled gets the agent's hello first;
// the agent counts itself connected only once the server proved its key
// over this connection (as an agent-dialed one), answers with its own
// proof, then serves it as it serves an accepted connection. A close, any
// frame before the server's proof, or a proof by another key, is a failed
// handshake and the agent dials again.
func TestDialledServerIsGreetedAndServed(t *testing.T) {
	s := listenAsServer(t)
	h := dialling(t, s, "")
	pifleetServer := &greeting{key: testServerKey, caps: []string{transport.CapabilityPifleet}}

	// Refused by the server: closed after the agent's hello.
	c := newClient(t, s.accept(), nil, auth.AgentDialed)
	if hello := c.hello(); hello.Machine != "worker-01" || hello.Role != transport.RoleAgent || hello.Challenge == "" {
		t.Fatalf("hello %+v", hello)
	}
	c.close()

	// A frame before the server's proof: the agent hangs up.
	c = newClient(t, s.accept(), nil, auth.AgentDialed)
	c.hello()
	c.send(&transport.ListFrame{})
	select {
	case <-c.closed:
	case <-time.After(waitLimit):
		t.Fatal("the agent kept a connection whose server spoke before its proof")
	}
	if len(h.a.peersSnapshot()) != 0 {
		t.Error("a connection that failed its handshake is a peer")
	}

	// A proof by another key, or one made as if the server had dialled
	// (relayed from another connection): the agent hangs up.
	_, other, _ := ed25519.GenerateKey(nil)
	for _, bad := range []struct {
		g   *greeting
		dir auth.Direction
	}{{&greeting{key: other}, auth.AgentDialed}, {pifleetServer, auth.ServerDialed}} {
		c = newClient(t, s.accept(), bad.g, bad.dir)
		c.hello()
		if got := readAll(t, c); len(got) != 0 {
			t.Fatalf("a bad proof (%v) got %d frames after the hello", bad.dir, len(got))
		}
	}

	// Admitted: the server's proof, the agent's own, then the agent
	// serves it.
	c = newClient(t, s.accept(), pifleetServer, auth.AgentDialed)
	c.hello()
	select {
	case p := <-c.proof:
		if k, err := auth.VerifyAgent(p.KeyProof, c.transcript); err != nil || !auth.SameKey(k, h.a.PublicKey()) {
			t.Fatalf("the agent's proof: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("no auth_proof from the agent")
	}
	if r := nextOf[*transport.SessionsReportFrame](c, nil); !r.Full {
		t.Errorf("sessions_report %+v", r)
	}
	inst := c.mustSpawn("s1", h.cwd, "default", nil)
	if got := c.roundTrip("l1"); len(got.Instances) != 1 || got.Instances[0].InstanceID != inst.InstanceID {
		t.Fatalf("instances %+v", got.Instances)
	}
	peers := h.a.peersSnapshot()
	if len(peers) != 1 || !peers[0].pifleet.Load() || peers[0].id.Machine != pinned {
		t.Fatalf("peers %+v", peers)
	}

	// Lost: the agent dials again, and the worker is still there.
	c.close()
	c = newClient(t, s.accept(), pifleetServer, auth.AgentDialed)
	c.hello()
	if got := c.roundTrip("l2"); len(got.Instances) != 1 || got.Instances[0].State != transport.InstanceRunning {
		t.Fatalf("instances after the redial %+v", got.Instances)
	}
}

func TestDialAddressMustBeHostPort(t *testing.T) {
	whois, err := identity.ParseStatic("127.0.0.1=" + pinned)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Config{Pin: trust.Pin{Machine: pinned}, Whois: whois, StateDir: t.TempDir(),
		Dial: []string{"a:1", "b:2", "a:1"}, ServerKeys: []ed25519.PublicKey{testServerKey.Public().(ed25519.PublicKey)}}.withDefaults()
	if err != nil || strings.Join(c.Dial, ",") != "a:1,b:2" {
		t.Errorf("Dial a:1,b:2,a:1 = %v, %v; want each address once", c.Dial, err)
	}
	for _, addr := range []string{"nohost", "box:", ""} {
		_, err := Config{Pin: trust.Pin{Machine: pinned}, Whois: whois, StateDir: t.TempDir(), Dial: []string{addr},
			ServerKeys: []ed25519.PublicKey{testServerKey.Public().(ed25519.PublicKey)}}.withDefaults()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), fmt.Sprintf("%q", addr)) {
			t.Errorf("Dial %q: %v", addr, err)
		}
	}
}
