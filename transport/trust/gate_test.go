package trust

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"example.com/pifleet/transport/identity"
)

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestServerGate(t *testing.T) {
	whois, err := identity.ParseStatic("127.0.0.2=buildbox/ana@github,127.0.0.3=ana-mba/ana@github,127.0.0.4=ci-runner-3/tagged-devices")
	if err != nil {
		t.Fatal(err)
	}
	prompter := &countingPrompter{p: Allow}
	s := openStore(t, dbPath(t), WithPrompter(prompter))
	if _, err := s.Set("ana-mba", Steer); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set("ci-runner-3", Deny); err != nil {
		t.Fatal(err)
	}
	gate := ServerGate(whois, s)

	// Known, steer; IPv4 seen through a dual-stack listener.
	id, p, err := gate(t.Context(), mustAddrPort("[::ffff:127.0.0.3]:50000"))
	if err != nil || p != Steer || id.Machine != "ana-mba" {
		t.Errorf("known steer: %v, %q, %v", id, p, err)
	}
	// Unknown machine: first contact, asked, allowed.
	id, p, err = gate(t.Context(), mustAddrPort("127.0.0.2:50001"))
	if err != nil || p != Allow || id != buildbox || prompter.count() != 1 {
		t.Errorf("first contact: %v, %q, %v (asked %d)", id, p, err, prompter.count())
	}
	// Known, deny.
	_, p, err = gate(t.Context(), mustAddrPort("127.0.0.4:50002"))
	refused, ok := errors.AsType[*RefusedError](err)
	if !ok || !errors.Is(err, ErrDenied) || p != Deny || refused.Identity.Machine != "ci-runner-3" {
		t.Errorf("deny: %q, %#v", p, err)
	}
	if want := "trust: refused connection from 127.0.0.4:50002 (ci-runner-3 (tagged-devices)): trust: machine is denied"; err.Error() != want {
		t.Errorf("message %q\nwant    %q", err, want)
	}
	// Nobody vouches for the address: refused, nobody asked.
	id, p, err = gate(t.Context(), mustAddrPort("127.0.0.9:50003"))
	if !errors.Is(err, ErrRefused) || !errors.Is(err, identity.ErrUnknownPeer) || p != Deny || id != (identity.Identity{}) {
		t.Errorf("whois failure: %v, %q, %v", id, p, err)
	}
	if prompter.count() != 1 {
		t.Errorf("asked about an unidentified peer")
	}
}

func TestServerGatePromptFailureRefuses(t *testing.T) {
	whois := identity.WhoisFunc(func(context.Context, netip.Addr) (identity.Identity, error) { return buildbox, nil })
	s := openStore(t, dbPath(t), WithPrompter(PrompterFunc(func(context.Context, identity.Identity) (Policy, error) {
		return "", errors.New("nobody at the terminal")
	})))
	_, p, err := ServerGate(whois, s)(t.Context(), mustAddrPort("100.87.12.34:41000"))
	if p != Deny || !errors.Is(err, ErrRefused) || !errors.Is(err, ErrPromptFailed) || !strings.Contains(err.Error(), "nobody at the terminal") {
		t.Errorf("gate = %q, %v", p, err)
	}
}
