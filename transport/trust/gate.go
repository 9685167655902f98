package trust

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"example.com/pifleet/transport/identity"
)

// Errors that callers may test for with errors.Is.
var (
	// ErrRefused: the connection must be closed before any frame is read
	// or written. Every error of ServerGate and Pin.Admit matches it; the
	// cause (whois failure, ErrDenied, ErrNotPinned, …) is wrapped too.
	ErrRefused = errors.New("trust: connection refused")
	// ErrDenied: the machine's policy is deny.
	ErrDenied = errors.New("trust: machine is denied")
)

// RefusedError reports a refused connection (errors.Is(err, ErrRefused)),
// with its cause.
type RefusedError struct {
	// Remote is the peer's address.
	Remote netip.AddrPort
	// Identity is who the peer is; zero when whois failed.
	Identity identity.Identity
	// Err is why.
	Err error
}

func (e *RefusedError) Error() string {
	who := e.Remote.String()
	if e.Identity.Machine != "" {
		who += " (" + e.Identity.String() + ")"
	}
	return fmt.Sprintf("trust: refused connection from %s: %v", who, e.Err)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Unwrap returns the cause.
func (e *RefusedError) Unwrap() error { return e.Err }

// ServerGate returns the server's check for an inbound agent connection:
// who is it (whois), and what may it do (store.Decide, asking on first
// contact). A whois failure, a deny policy, or a first contact nobody
// answered is a *RefusedError, and the caller closes the connection
// before processing any frame. On success the caller keeps the identity
// and policy with the connection and checks each operation against them
// (see Check).
func ServerGate(whois identity.Whois, store *Store) func(ctx context.Context, remote netip.AddrPort) (identity.Identity, Policy, error) {
	return func(ctx context.Context, remote netip.AddrPort) (identity.Identity, Policy, error) {
		id, err := whois.Whois(ctx, remote.Addr())
		if err != nil {
			store.log.Warn().Stringer("remote", remote).Err(err).Msg("refused: whois failed")
			return identity.Identity{}, Deny, &RefusedError{Remote: remote, Err: err}
		}
		p, err := store.Decide(ctx, id)
		if err == nil && p == Deny {
			err = ErrDenied
		}
		if err != nil {
			store.log.Warn().Stringer("remote", remote).Str("machine", id.Machine).Str("user", id.User).
				Err(err).Msg("refused")
			return id, Deny, &RefusedError{Remote: remote, Identity: id, Err: err}
		}
		return id, p, nil
	}
}
