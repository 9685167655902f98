package identity

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode"
)

// Static is a fixed address → identity map for loopback development and
// tests, where no tailscaled can vouch for peers. Anyone who can use a
// listed address is believed, so binaries must say loudly when a Static
// map is in force (see IsStatic).
//
// On loopback, give each process its own address (127.0.0.2, 127.0.0.3, …
// all reach the loopback interface on Linux) and bind it as the dialing
// side's local address, so that the peer address tells them apart.
type Static struct {
	byAddr map[netip.Addr]Identity
}

// EntryError reports a static entry that does not parse
// (errors.Is(err, ErrBadEntry)).
type EntryError struct {
	// Entry is the offending entry as given.
	Entry string
	// Reason says what is wrong with it.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

func (e *EntryError) Error() string {
	msg := fmt.Sprintf("identity: static entry %q: %s", e.Entry, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrBadEntry) true.
func (e *EntryError) Is(target error) bool { return target == ErrBadEntry }

// Unwrap returns the underlying error.
func (e *EntryError) Unwrap() error { return e.Err }

// ParseStaticEntry parses one entry of the form IP=MACHINE or
// IP=MACHINE/USER ("127.0.0.2=buildbox/ana@github"). Surrounding spaces
// are ignored. An IPv4-mapped IPv6 address is stored as IPv4. Names may
// not contain spaces, control characters, ',' or '='; the machine may not
// contain '/'.
func ParseStaticEntry(entry string) (netip.Addr, Identity, error) {
	bad := func(reason string, err error) (netip.Addr, Identity, error) {
		return netip.Addr{}, Identity{}, &EntryError{Entry: entry, Reason: reason, Err: err}
	}
	s := strings.TrimSpace(entry)
	if s == "" {
		return bad("empty entry", nil)
	}
	ipText, who, ok := strings.Cut(s, "=")
	if !ok {
		return bad("want IP=MACHINE or IP=MACHINE/USER", nil)
	}
	addr, err := netip.ParseAddr(ipText)
	if err != nil {
		return bad("bad IP address", err)
	}
	if addr.Zone() != "" {
		return bad("IP address must not carry a zone", nil)
	}
	machine, user, hasUser := strings.Cut(who, "/")
	if machine == "" {
		return bad("machine name is empty", nil)
	}
	if r, ok := badNameRune(machine); ok {
		return bad(fmt.Sprintf("machine name contains %q", r), nil)
	}
	if hasUser {
		if user == "" {
			return bad("user after '/' is empty", nil)
		}
		if r, ok := badNameRune(user); ok {
			return bad(fmt.Sprintf("user contains %q", r), nil)
		}
	}
	return addr.Unmap(), Identity{Machine: machine, User: user}, nil
}

// badNameRune returns the first rune of s that a static name may not hold.
func badNameRune(s string) (rune, bool) {
	for _, r := range s {
		if r == ',' || r == '=' || r == unicode.ReplacementChar || unicode.IsSpace(r) || unicode.IsControl(r) {
			return r, true
		}
	}
	return 0, false
}

// ParseStatic builds a Static map from entries (see ParseStaticEntry).
// Each argument may hold several entries separated by commas, so that a
// whole map fits in one flag or environment variable:
// "127.0.0.1=server/ana@github,127.0.0.2=buildbox". Blank pieces are
// skipped; an address listed twice is an error.
func ParseStatic(entries ...string) (*Static, error) {
	s := &Static{byAddr: make(map[netip.Addr]Identity)}
	seen := make(map[netip.Addr]string)
	for _, arg := range entries {
		for piece := range strings.SplitSeq(arg, ",") {
			if strings.TrimSpace(piece) == "" {
				continue
			}
			addr, id, err := ParseStaticEntry(piece)
			if err != nil {
				return nil, err
			}
			if first, dup := seen[addr]; dup {
				return nil, &EntryError{Entry: piece, Reason: fmt.Sprintf("address %s already listed in %q", addr, first)}
			}
			seen[addr] = piece
			s.byAddr[addr] = id
		}
	}
	return s, nil
}

// Whois returns the identity listed for addr, or an error wrapping
// ErrUnknownPeer.
func (s *Static) Whois(_ context.Context, addr netip.Addr) (Identity, error) {
	addr, err := normalize(addr)
	if err != nil {
		return Identity{}, err
	}
	id, ok := s.byAddr[addr]
	if !ok {
		return Identity{}, fmt.Errorf("%w: %s is not in the static identity map", ErrUnknownPeer, addr)
	}
	return id, nil
}

// Entries returns the map as entries, sorted by address, in the syntax
// ParseStatic reads — for the warning a binary prints at start.
func (s *Static) Entries() []string {
	addrs := make([]netip.Addr, 0, len(s.byAddr))
	for a := range s.byAddr {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = FormatStaticEntry(a, s.byAddr[a])
	}
	return out
}

// FormatStaticEntry renders one entry in the syntax ParseStaticEntry reads.
func FormatStaticEntry(addr netip.Addr, id Identity) string {
	if id.User == "" {
		return addr.String() + "=" + id.Machine
	}
	return addr.String() + "=" + id.Machine + "/" + id.User
}

// IsStaticMap marks Static as a static map; see IsStatic.
func (s *Static) IsStaticMap() bool { return true }

// IsStatic reports whether w vouches for peers from a fixed list rather
// than from the network. Binaries call it to warn loudly at start.
func IsStatic(w Whois) bool {
	m, ok := w.(interface{ IsStaticMap() bool })
	return ok && m.IsStaticMap()
}
