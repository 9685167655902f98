package identity

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Identity is who a peer is: the tailnet machine and the user who owns it.
type Identity struct {
	// Machine is the machine's short name ("buildbox").
	Machine string
	// User is the owner's login ("ana@github"). Static entries may leave
	// it empty; tailscale always reports one.
	User string
}

// String renders the identity as people read it: "buildbox (ana@github)",
// or just "buildbox" when no user is known.
func (id Identity) String() string {
	if id.User == "" {
		return id.Machine
	}
	return id.Machine + " (" + id.User + ")"
}

// Whois maps a peer address to the identity behind it.
//
// Implementations must treat an IPv4-mapped IPv6 address (::ffff:a.b.c.d,
// which dual-stack listeners report for IPv4 peers) as the IPv4 address,
// and must return an error, never a partial Identity, when they cannot
// vouch for the peer.
type Whois interface {
	Whois(ctx context.Context, addr netip.Addr) (Identity, error)
}

// WhoisFunc adapts a function to the Whois interface.
type WhoisFunc func(ctx context.Context, addr netip.Addr) (Identity, error)

// Whois calls f.
func (f WhoisFunc) Whois(ctx context.Context, addr netip.Addr) (Identity, error) {
	return f(ctx, addr)
}

// Errors that callers may test for with errors.Is.
var (
	// ErrUnknownPeer: nobody vouches for the address.
	ErrUnknownPeer = errors.New("identity: unknown peer")
	// ErrIncompleteIdentity: the answer lacks the machine or the user.
	ErrIncompleteIdentity = errors.New("identity: incomplete identity")
	// ErrInvalidAddr: the address to look up is not a valid IP address.
	ErrInvalidAddr = errors.New("identity: invalid address")
	// ErrTailscaleNotFound: no working tailscale CLI on PATH or at the
	// platform's usual install locations.
	ErrTailscaleNotFound = errors.New("identity: tailscale CLI not found (PATH and platform fallbacks checked)")
	// ErrMalformed: the tailscale CLI printed something that is not the
	// expected output. A *ParseError carries the details.
	ErrMalformed = errors.New("identity: malformed tailscale output")
	// ErrOutputTooLarge: the tailscale CLI printed more than MaxOutput bytes.
	ErrOutputTooLarge = errors.New("identity: tailscale output too large")
	// ErrBadEntry: a static identity entry does not parse. An *EntryError
	// carries the details.
	ErrBadEntry = errors.New("identity: bad static entry")
)

// IncompleteError reports a whois answer without a machine or a user
// (errors.Is(err, ErrIncompleteIdentity)).
type IncompleteError struct {
	Machine, User string
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("identity: tailscale whois returned incomplete identity (machine %q, user %q)", e.Machine, e.User)
}

// Is makes errors.Is(err, ErrIncompleteIdentity) true.
func (e *IncompleteError) Is(target error) bool { return target == ErrIncompleteIdentity }

// ShortName returns the first label of a DNS name, without the trailing
// dot of a fully qualified name: "buildbox.tail1234.ts.net." → "buildbox".
// A name without dots is returned as is.
func ShortName(dnsName string) string {
	name := strings.TrimSuffix(dnsName, ".")
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return name
}

// normalize prepares addr for lookup: IPv4-mapped IPv6 becomes IPv4 and a
// zone (fe80::1%eth0) is dropped, because identities belong to addresses,
// not to interfaces.
func normalize(addr netip.Addr) (netip.Addr, error) {
	if !addr.IsValid() {
		return netip.Addr{}, fmt.Errorf("%w: zero address", ErrInvalidAddr)
	}
	return addr.Unmap().WithZone(""), nil
}
