package auth

import (
	"context"
	"crypto/ed25519"
	"net"
	"testing"
	"time"

	"example.com/pifleet/transport"
)

func FuzzParsePublicKey(f *testing.F) {
	f.Add(FormatPublicKey(make([]byte, 32)))
	f.Add("ed25519:")
	f.Add("ed25519:AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePublicKey(s)
		if err != nil {
			return
		}
		if len(k) != ed25519.PublicKeySize {
			t.Fatalf("parsed a %d-byte key", len(k))
		}
		if back, err := ParsePublicKey(FormatPublicKey(k)); err != nil || !SameKey(back, k) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzParseChallenge(f *testing.F) {
	f.Add(EncodeChallenge(NewChallenge()))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseChallenge(s)
		if err == nil && (len(c) != ChallengeSize || EncodeChallenge(c) != s) {
			t.Fatalf("accepted %q as %x", s, c)
		}
	})
}

func FuzzParseKeyRing(f *testing.F) {
	_, k, _ := ed25519.GenerateKey(nil)
	r := &KeyRing{Current: k, Retired: []RetiredKey{{Key: k, Until: time.Unix(2e9, 0)}}}
	good, _ := r.Marshal()
	f.Add(good)
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseKeyRing(data)
		if err != nil {
			return
		}
		if len(r.Current) != ed25519.PrivateKeySize {
			t.Fatalf("current key of %d bytes", len(r.Current))
		}
		out, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseKeyRing(out)
		if err != nil || !SameKey(again.Public(), r.Public()) || len(again.Retired) != len(r.Retired) {
			t.Fatalf("re-parse: %v", err)
		}
	})
}

// Whatever bytes a peer sends in answer to the agent's hello, the
// handshake never succeeds without a valid proof by the trusted key.
func FuzzAgentHandshake(f *testing.F) {
	_, k, _ := ed25519.GenerateKey(nil)
	hello := serverHello()
	hello.Challenge = EncodeChallenge(NewChallenge())
	hello.Proofs = []transport.KeyProof{Sign(k, transport.RoleServer, Transcript{})}
	line, _ := transport.MarshalFrame(hello)
	f.Add(line)
	f.Add([]byte(`{"v":1,"type":"list","id":"r-1"}` + "\n"))
	f.Add([]byte("\n\n{}\n"))
	trusted := []ed25519.PublicKey{k.Public().(ed25519.PublicKey)}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, s := net.Pipe()
		defer s.Close()
		go func() {
			buf := make([]byte, 4096)
			s.Read(buf) // the agent's hello
			s.Write(data)
			s.Write([]byte("\n"))
		}()
		res, err := AgentHandshake(context.Background(), a, AgentConfig{Hello: agentHello(), TrustedKeys: trusted, Timeout: 200 * time.Millisecond})
		if err == nil {
			t.Fatalf("handshake succeeded on %q: %+v", data, res)
		}
	})
}
