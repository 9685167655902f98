package trust

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"example.com/pifleet/transport/identity"
)

// Errors that callers may test for with errors.Is.
var (
	// ErrNotPinned: the peer is not the pinned server.
	ErrNotPinned = errors.New("trust: not the pinned server")
	// ErrNoPin: the agent has no pinned server, so it admits nobody.
	ErrNoPin = errors.New("trust: no server pinned")
	// ErrBadPin: a pin does not parse.
	ErrBadPin = errors.New("trust: bad pin")
)

// Pin is the one server an agent obeys: its machine name and, optionally,
// its user. The agent admits connections from the pinned machine only
// (deny by default); when User is set, the user must match too
// (the TypeScript agent compares the machine only).
type Pin struct {
	Machine string
	User    string
}

// ParsePin reads a pin written MACHINE or MACHINE/USER
// ("orchestrator/ana@github"), as the agent's --server flag takes it.
func ParsePin(s string) (Pin, error) {
	text := strings.TrimSpace(s)
	machine, user, hasUser := strings.Cut(text, "/")
	switch {
	case machine == "":
		return Pin{}, fmt.Errorf("%w %q: machine name is empty", ErrBadPin, s)
	case hasUser && user == "":
		return Pin{}, fmt.Errorf("%w %q: user after '/' is empty", ErrBadPin, s)
	case strings.ContainsFunc(text, badPinRune):
		return Pin{}, fmt.Errorf("%w %q: contains a space or control character", ErrBadPin, s)
	}
	return Pin{Machine: machine, User: user}, nil
}

func badPinRune(r rune) bool {
	return r == ' ' || r == '\t' || r < 0x20 || r == 0x7f
}

// String renders the pin as ParsePin reads it.
func (p Pin) String() string {
	if p.User == "" {
		return p.Machine
	}
	return p.Machine + "/" + p.User
}

// Matches reports whether id is the pinned server. Names compare exactly.
func (p Pin) Matches(id identity.Identity) bool {
	return p.Machine != "" && id.Machine == p.Machine && (p.User == "" || id.User == p.User)
}

// Admit resolves the peer at remote and lets it in only if it is the
// pinned server. Anyone else, and any whois failure, is a *RefusedError:
// the agent closes the connection without sending a byte.
func (p Pin) Admit(ctx context.Context, whois identity.Whois, remote netip.AddrPort) (identity.Identity, error) {
	if p.Machine == "" {
		return identity.Identity{}, &RefusedError{Remote: remote, Err: ErrNoPin}
	}
	id, err := whois.Whois(ctx, remote.Addr())
	if err != nil {
		return identity.Identity{}, &RefusedError{Remote: remote, Err: err}
	}
	if !p.Matches(id) {
		return id, &RefusedError{Remote: remote, Identity: id, Err: fmt.Errorf("%w %s", ErrNotPinned, p)}
	}
	return id, nil
}

// Hook returns Admit in the shape of the transport's accept hook.
func (p Pin) Hook(whois identity.Whois) func(ctx context.Context, remote netip.AddrPort) error {
	return func(ctx context.Context, remote netip.AddrPort) error {
		_, err := p.Admit(ctx, whois, remote)
		return err
	}
}
