//go:build unix

package agent

import (
	"crypto/ed25519"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// readAll returns every frame the agent sends on nc until it closes it.
func readAll(t *testing.T, c *client) []transport.Frame {
	t.Helper()
	<-c.closed
	var out []transport.Frame
	for {
		select {
		case f := <-c.frames:
			out = append(out, f)
		default:
			return out
		}
	}
}

// A peer on the pinned machine that does not prove the server key gets the
// agent's hello and nothing else; its frames are never processed (a spawn
// sent right away starts no worker), and the connection is closed.
func TestNoFrameProcessedBeforeTheProof(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.HandshakeTimeout = 300 * time.Millisecond }})
	c := dialAs(t, h.a.Addr().String(), "", nil)
	spawn := &transport.SpawnFrame{Cwd: h.cwd, Bundle: "default"}
	spawn.ID = "s1"
	c.send(spawn)
	got := readAll(t, c)
	if len(got) != 1 || got[0].FrameType() != transport.TypeHello {
		var types []string
		for _, f := range got {
			types = append(types, f.FrameType())
		}
		t.Fatalf("an unproven peer received %v, want only hello", types)
	}
	if ids := h.a.runningIDs(); len(ids) != 0 {
		t.Errorf("an unproven spawn started workers %v", ids)
	}
}

// A proof by a key the agent does not trust: hello, then the close.
func TestWrongServerKeyRefused(t *testing.T) {
	h := newHarness(t, hopts{})
	_, other, _ := ed25519.GenerateKey(nil)
	c := dialAs(t, h.a.Addr().String(), "", &greeting{key: other})
	got := readAll(t, c)
	if len(got) != 1 || got[0].FrameType() != transport.TypeHello {
		t.Fatalf("received %d frames, want the hello alone", len(got))
	}
	// the right key still gets in
	h.dial(t).roundTrip("l")
}

// A TypeScript server (no hello, no proof) is refused unless the agent
// allows v1 servers; with the flag it is served, the pin still applies.
func TestV1ServerNeedsTheFlag(t *testing.T) {
	h := newHarness(t, hopts{})
	c := dialAs(t, h.a.Addr().String(), "", nil)
	c.send(&transport.ListFrame{Header: transport.Header{ID: "l"}})
	if got := readAll(t, c); len(got) != 1 {
		t.Fatalf("a v1 server without the flag received %d frames", len(got))
	}

	h = newHarness(t, hopts{static: "127.0.0.1=" + pinned + ",127.0.0.2=intruder", mod: func(c *Config) {
		c.ServerKeys, c.AllowV1Server = nil, true
	}})
	c = dialAs(t, h.a.Addr().String(), "", nil)
	c.hello()
	if l := c.roundTrip("l"); l == nil {
		t.Fatal("no answer")
	}
	d := dialAs(t, h.a.Addr().String(), "127.0.0.2", nil)
	n, _ := io.Copy(io.Discard, d.nc)
	if n != 0 || len(readAll(t, d)) != 0 {
		t.Errorf("an unpinned v1 server received bytes")
	}
}

// Trust on first use: the first key proven is stored (0600) and only it
// is obeyed afterwards, across restarts.
func TestTrustFirstServerKey(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.ServerKeys, c.TrustFirstServerKey = nil, true }})
	h.dial(t).roundTrip("l")
	path := filepath.Join(h.cfg.StateDir, TrustedServerKeysFile)
	keys, err := auth.ReadPublicKeys(path)
	if err != nil || len(keys) != 1 || !auth.SameKey(keys[0], testServerKey.Public().(ed25519.PublicKey)) {
		t.Fatalf("stored %v, %v", keys, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	_, other, _ := ed25519.GenerateKey(nil)
	if got := readAll(t, dialAs(t, h.a.Addr().String(), "", &greeting{key: other})); len(got) != 1 {
		t.Errorf("another key after first use: %d frames", len(got))
	}
	h.a.Close()
	h2 := newHarness(t, hopts{stateDir: h.cfg.StateDir, mod: func(c *Config) { c.ServerKeys, c.TrustFirstServerKey = nil, true }})
	if got := readAll(t, dialAs(t, h2.a.Addr().String(), "", &greeting{key: other})); len(got) != 1 {
		t.Errorf("another key after a restart: %d frames", len(got))
	}
	h2.dial(t).roundTrip("l")
}

// The agent refuses to start without a server key, naming the flags.
func TestNoServerKeyIsAConfigError(t *testing.T) {
	whois, _ := identity.ParseStatic("127.0.0.1=" + pinned)
	_, err := New(Config{Pin: trust.Pin{Machine: pinned}, Whois: whois, StateDir: t.TempDir()})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--server-key") || !strings.Contains(err.Error(), "--allow-v1-server") {
		t.Fatalf("got %v", err)
	}
}

// The agent's key pair is created on first start, private (0600), and the
// same on the next start.
func TestAgentKeyFile(t *testing.T) {
	h := newHarness(t, hopts{noRun: true})
	path := filepath.Join(h.cfg.StateDir, AgentKeyFile)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("agent key: %v, %v", st, err)
	}
	pub := h.a.PublicKey()
	h.a.Close()
	h2 := newHarness(t, hopts{stateDir: h.cfg.StateDir, noRun: true})
	if !auth.SameKey(h2.a.PublicKey(), pub) {
		t.Error("the agent's key changed across restarts")
	}
}
