package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"example.com/pifleet/transport"
)

// TranscriptVersion names the transcript layout; it is the first field of
// every signed message, so that a signature made for one layout can never
// verify under another.
const TranscriptVersion = "pifleet-auth-v1"

// ChallengeSize is the length of a challenge in bytes (256 random bits).
const ChallengeSize = 32

// Direction says which side opened the TCP connection.
type Direction string

// Directions.
const (
	// ServerDialed: the server dialled the agent's listener.
	ServerDialed Direction = "server-dialed"
	// AgentDialed: the agent dialled the server's inbound listener.
	AgentDialed Direction = "agent-dialed"
)

// Errors that callers may test for with errors.Is.
var (
	// ErrBadChallenge: a hello's challenge is missing or malformed.
	ErrBadChallenge = errors.New("auth: bad challenge")
	// ErrBadProof: no proof verifies over this connection's transcript.
	ErrBadProof = errors.New("auth: proof does not verify")
	// ErrUntrustedKey: the peer proved a key that is not trusted.
	ErrUntrustedKey = errors.New("auth: key not trusted")
	// ErrNoProof: the peer sent something other than its proof first, or
	// nothing in time.
	ErrNoProof = errors.New("auth: no proof")
)

// Transcript is what a proof signs: everything that identifies one
// connection's handshake. Each side computes it from what it saw; if any
// field differs (another connection, another direction, another agent),
// the signature does not verify.
type Transcript struct {
	Direction Direction
	// AgentMachine is the machine name of the agent's hello.
	AgentMachine string
	// AgentChallenge and ServerChallenge are the nonces of the two hellos.
	AgentChallenge, ServerChallenge []byte
	// Dialer and Acceptor are the TCP endpoints ("ip:port") of the side
	// that dialled and of the side that accepted; both empty when Proxied.
	Dialer, Acceptor string
	// Proxied: the agent said it is reached through a TCP proxy or NAT
	// (the two sides see different endpoints), so the endpoints are not
	// part of the transcript.
	Proxied bool
}

// Bindings of the transcript's endpoints.
const (
	bindEndpoints = "endpoints"
	bindProxied   = "proxied"
)

// Message returns the bytes signer signs with key: each field prefixed
// with its length as a 4-byte big-endian number, in this order: the
// version, the signer's role, the direction, the binding ("endpoints" or
// "proxied"), the agent machine, the agent challenge, the server
// challenge, the signer's public key, the dialer endpoint and the
// acceptor endpoint (both empty when proxied).
func (t Transcript) Message(signer transport.Role, key ed25519.PublicKey) []byte {
	binding, dialer, acceptor := bindEndpoints, t.Dialer, t.Acceptor
	if t.Proxied {
		binding, dialer, acceptor = bindProxied, "", ""
	}
	fields := [][]byte{
		[]byte(TranscriptVersion), []byte(signer), []byte(t.Direction), []byte(binding), []byte(t.AgentMachine),
		t.AgentChallenge, t.ServerChallenge, key, []byte(dialer), []byte(acceptor),
	}
	n := 0
	for _, f := range fields {
		n += 4 + len(f)
	}
	out := make([]byte, 0, n)
	for _, f := range fields {
		out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return out
}

// Sign returns signer's proof over t made with priv.
func Sign(priv ed25519.PrivateKey, signer transport.Role, t Transcript) transport.KeyProof {
	pub := priv.Public().(ed25519.PublicKey)
	sig := ed25519.Sign(priv, t.Message(signer, pub))
	return transport.KeyProof{Key: FormatPublicKey(pub), Sig: base64.RawURLEncoding.EncodeToString(sig)}
}

// Verify checks that p is signer's valid signature over t by the key it
// names, and returns that key. It does not say whether the key is
// trusted.
func Verify(p transport.KeyProof, signer transport.Role, t Transcript) (ed25519.PublicKey, error) {
	key, err := ParsePublicKey(p.Key)
	if err != nil {
		return nil, err
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(p.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("%w: the signature is not %d bytes of unpadded URL-safe base64", ErrBadProof, ed25519.SignatureSize)
	}
	if !ed25519.Verify(key, t.Message(signer, key), sig) {
		return nil, fmt.Errorf("%w: the signature by %s is not over this connection", ErrBadProof, FormatPublicKey(key))
	}
	return key, nil
}

// VerifyTrusted returns the first of proofs that verifies and is made by
// a key in trusted. The error says whether a proof was valid for an
// untrusted key (ErrUntrustedKey) or none was valid (ErrBadProof).
func VerifyTrusted(proofs []transport.KeyProof, signer transport.Role, t Transcript, trusted []ed25519.PublicKey) (ed25519.PublicKey, error) {
	if len(proofs) == 0 {
		return nil, fmt.Errorf("%w: the hello carries no proof", ErrNoProof)
	}
	var valid []string
	var firstErr error
	for _, p := range proofs {
		key, err := Verify(p, signer, t)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if ContainsKey(trusted, key) {
			return key, nil
		}
		valid = append(valid, FormatPublicKey(key))
	}
	if len(valid) > 0 {
		return nil, fmt.Errorf("%w: the peer proved %v", ErrUntrustedKey, valid)
	}
	return nil, firstErr
}

// NewChallenge returns a fresh random challenge.
func NewChallenge() []byte {
	c := make([]byte, ChallengeSize)
	rand.Read(c) // never fails (crypto/rand)
	return c
}

// EncodeChallenge is a challenge's form in a hello.
func EncodeChallenge(c []byte) string { return base64.RawURLEncoding.EncodeToString(c) }

// ParseChallenge reads a hello's challenge: exactly ChallengeSize bytes
// of unpadded URL-safe base64.
func ParseChallenge(s string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: none", ErrBadChallenge)
	}
	c, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(c) != ChallengeSize {
		return nil, fmt.Errorf("%w: not %d bytes of unpadded URL-safe base64", ErrBadChallenge, ChallengeSize)
	}
	return c, nil
}

// Endpoints returns the dialer's and the acceptor's endpoints of nc as
// this side sees them: dialed says whether this side dialled.
func Endpoints(nc net.Conn, dialed bool) (dialer, acceptor string) {
	local, remote := endpoint(nc.LocalAddr()), endpoint(nc.RemoteAddr())
	if dialed {
		return local, remote
	}
	return remote, local
}

// endpoint renders an address with IPv4-mapped IPv6 addresses unmapped,
// so that both sides write the same text.
func endpoint(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	if a == nil {
		return ""
	}
	return a.String()
}
