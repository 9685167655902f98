package identity

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
)

// ParseError reports tailscale CLI output that does not parse
// (errors.Is(err, ErrMalformed)).
type ParseError struct {
	// Command is the CLI command whose output this was ("whois --json").
	Command string
	// Detail says what is wrong.
	Detail string
	// Err is the underlying decoding error, if any.
	Err error
}

func (e *ParseError) Error() string {
	msg := "identity: malformed output of tailscale " + e.Command + ": " + e.Detail
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *ParseError) Is(target error) bool { return target == ErrMalformed }

// Unwrap returns the underlying decoding error.
func (e *ParseError) Unwrap() error { return e.Err }

// whoisJSON is the part of tailscale's WhoIsResponse that pifleet reads.
// The CLI prints the LocalAPI's apitype.WhoIsResponse: {Node (a
// tailcfg.Node), UserProfile, CapMap}.
type whoisJSON struct {
	Node *struct {
		Name         string
		ComputedName string
	}
	UserProfile *struct {
		LoginName string
	}
}

// ParseWhois reads the output of `tailscale whois --json <ip>`.
//
// The machine is Node.ComputedName (tailscale's short name for the node;
// the full name without trailing dot for nodes shared in from another
// tailnet); when that is empty, the short host name of Node.Name. The user
// is UserProfile.LoginName (tagged nodes report the pseudo-user
// "tagged-devices"). Both must be non-empty, else the result is an
// *IncompleteError.
func ParseWhois(data []byte) (Identity, error) {
	var w whoisJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return Identity{}, &ParseError{Command: "whois --json", Detail: "not a whois JSON object", Err: err}
	}
	var id Identity
	if w.Node != nil {
		id.Machine = w.Node.ComputedName
		if id.Machine == "" {
			id.Machine = ShortName(w.Node.Name)
		}
	}
	if w.UserProfile != nil {
		id.User = w.UserProfile.LoginName
	}
	if id.Machine == "" || id.User == "" {
		return Identity{}, &IncompleteError{Machine: id.Machine, User: id.User}
	}
	return id, nil
}

// Status is what pifleet reads from `tailscale status --json`.
type Status struct {
	// BackendState is tailscaled's state: "Running" when the tailnet is
	// usable; "NeedsLogin", "Stopped", "Starting", … otherwise.
	BackendState string
	// Self is this machine.
	Self Peer
	// Peers are the other machines of the tailnet, sorted by DNSName then
	// HostName so that listings are stable.
	Peers []Peer
}

// Running reports whether tailscaled is up and logged in.
func (s Status) Running() bool { return s.BackendState == "Running" }

// Peer is one machine of the tailnet. Fields missing from the CLI's output
// keep their zero value (empty names, offline, no addresses).
type Peer struct {
	// HostName is the machine's OS host name ("buildbox").
	HostName string
	// DNSName is its MagicDNS name, fully qualified with a trailing dot
	// ("buildbox.tail1234.ts.net."). Empty without MagicDNS.
	DNSName string
	// Online reports whether the control plane sees the machine connected.
	Online bool
	// TailscaleIPs are its tailnet addresses (IPv4 first, as tailscale
	// lists them).
	TailscaleIPs []netip.Addr
}

// Machine returns the name whois would report for this peer: the short
// MagicDNS name, else the host name.
func (p Peer) Machine() string {
	if n := ShortName(p.DNSName); n != "" {
		return n
	}
	return p.HostName
}

// IPv4 returns the peer's first tailnet IPv4 address, if it has one.
func (p Peer) IPv4() (netip.Addr, bool) {
	for _, a := range p.TailscaleIPs {
		if a.Is4() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// peerJSON is the part of ipnstate.PeerStatus that pifleet reads.
type peerJSON struct {
	HostName     string
	DNSName      string
	Online       bool
	TailscaleIPs []string
}

// statusJSON is the part of ipnstate.Status that pifleet reads. Peer is
// keyed by node public key ("nodekey:…").
type statusJSON struct {
	BackendState string
	Self         *peerJSON
	Peer         map[string]*peerJSON
}

// ParseStatus reads the output of `tailscale status --json`.
func ParseStatus(data []byte) (Status, error) {
	var s statusJSON
	if err := json.Unmarshal(data, &s); err != nil {
		return Status{}, &ParseError{Command: "status --json", Detail: "not a status JSON object", Err: err}
	}
	out := Status{BackendState: s.BackendState}
	if s.Self != nil {
		self, err := s.Self.peer("Self")
		if err != nil {
			return Status{}, err
		}
		out.Self = self
	}
	out.Peers = make([]Peer, 0, len(s.Peer))
	for key, pj := range s.Peer {
		if pj == nil {
			continue // "nodekey:…": null carries nothing to report
		}
		p, err := pj.peer("Peer[" + key + "]")
		if err != nil {
			return Status{}, err
		}
		out.Peers = append(out.Peers, p)
	}
	slices.SortFunc(out.Peers, func(a, b Peer) int {
		return cmp.Or(cmp.Compare(a.DNSName, b.DNSName), cmp.Compare(a.HostName, b.HostName))
	})
	return out, nil
}

func (pj *peerJSON) peer(where string) (Peer, error) {
	p := Peer{HostName: pj.HostName, DNSName: pj.DNSName, Online: pj.Online}
	for _, s := range pj.TailscaleIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return Peer{}, &ParseError{Command: "status --json", Detail: where + ".TailscaleIPs has a bad address", Err: err}
		}
		p.TailscaleIPs = append(p.TailscaleIPs, a)
	}
	return p, nil
}

// ParseIPv4 reads the output of `tailscale ip -4`: the machine's first
// tailnet IPv4 address, on the first line.
func ParseIPv4(data []byte) (netip.Addr, error) {
	line, _, _ := bytes.Cut(bytes.TrimSpace(data), []byte("\n"))
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return netip.Addr{}, &ParseError{Command: "ip -4", Detail: "no address printed"}
	}
	a, err := netip.ParseAddr(string(line))
	if err != nil {
		return netip.Addr{}, &ParseError{Command: "ip -4", Detail: fmt.Sprintf("first line %q is not an address", line), Err: err}
	}
	if !a.Is4() {
		return netip.Addr{}, &ParseError{Command: "ip -4", Detail: fmt.Sprintf("first line %q is not an IPv4 address", line)}
	}
	return a, nil
}
