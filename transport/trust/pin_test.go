package trust

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"example.com/pifleet/transport/identity"
)

// The agent-side gate, mirroring checklist items 66–68 (the over-TCP
// versions come with the agent).
func TestPinAdmit(t *testing.T) {
	whois, err := identity.ParseStatic("127.0.0.1=orchestrator/ana@github,127.0.0.5=intruder/eve@example.com,127.0.0.6=orchestrator/eve@example.com")
	if err != nil {
		t.Fatal(err)
	}
	server := Pin{Machine: "orchestrator"}

	// 66: the pinned server gets through (and the agent then sends hello).
	id, err := server.Admit(t.Context(), whois, mustAddrPort("127.0.0.1:40000"))
	if err != nil || id != (identity.Identity{Machine: "orchestrator", User: "ana@github"}) {
		t.Errorf("66 pinned server: %v, %v", id, err)
	}

	// 67: a machine that is not pinned is refused.
	id, err = server.Admit(t.Context(), whois, mustAddrPort("127.0.0.5:40001"))
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrNotPinned) || id.Machine != "intruder" {
		t.Errorf("67 not pinned: %v, %v", id, err)
	}
	if want := "trust: refused connection from 127.0.0.5:40001 (intruder (eve@example.com)): trust: not the pinned server orchestrator"; err.Error() != want {
		t.Errorf("message %q\nwant    %q", err, want)
	}

	// 68: whois cannot vouch for the peer: refused (deny by default).
	_, err = server.Admit(t.Context(), whois, mustAddrPort("127.0.0.9:40002"))
	if !errors.Is(err, ErrRefused) || !errors.Is(err, identity.ErrUnknownPeer) {
		t.Errorf("68 whois failure: %v", err)
	}
	failing := identity.WhoisFunc(func(context.Context, netip.Addr) (identity.Identity, error) {
		return identity.Identity{}, errors.New("tailscaled not running")
	})
	if _, err := server.Admit(t.Context(), failing, mustAddrPort("127.0.0.1:40003")); !errors.Is(err, ErrRefused) {
		t.Errorf("68 whois error: %v", err)
	}

	// The TypeScript agent ignores the user; a pinned user is enforced.
	withUser := Pin{Machine: "orchestrator", User: "ana@github"}
	if _, err := withUser.Admit(t.Context(), whois, mustAddrPort("127.0.0.1:40004")); err != nil {
		t.Errorf("pinned user: %v", err)
	}
	if _, err := withUser.Admit(t.Context(), whois, mustAddrPort("127.0.0.6:40005")); !errors.Is(err, ErrNotPinned) {
		t.Errorf("right machine, wrong user: %v", err)
	}
	if _, err := server.Admit(t.Context(), whois, mustAddrPort("127.0.0.6:40006")); err != nil {
		t.Errorf("machine-only pin must ignore the user: %v", err)
	}
}

func TestPinWithoutMachineAdmitsNobody(t *testing.T) {
	asked := false
	whois := identity.WhoisFunc(func(context.Context, netip.Addr) (identity.Identity, error) {
		asked = true
		return identity.Identity{Machine: "", User: ""}, nil
	})
	_, err := Pin{}.Admit(t.Context(), whois, mustAddrPort("127.0.0.1:1"))
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrNoPin) || asked {
		t.Errorf("empty pin: %v (whois asked: %v)", err, asked)
	}
	if (Pin{}).Matches(identity.Identity{}) {
		t.Error("an empty pin matches an empty identity")
	}
}

func TestPinHookHasTheAcceptHookShape(t *testing.T) {
	whois, _ := identity.ParseStatic("127.0.0.1=orchestrator/ana@github")
	var hook func(ctx context.Context, remote netip.AddrPort) error = Pin{Machine: "orchestrator"}.Hook(whois)
	if err := hook(t.Context(), mustAddrPort("127.0.0.1:9")); err != nil {
		t.Errorf("pinned: %v", err)
	}
	if err := hook(t.Context(), mustAddrPort("127.0.0.2:9")); !errors.Is(err, ErrRefused) {
		t.Errorf("unknown: %v", err)
	}
}

func TestParsePin(t *testing.T) {
	for in, want := range map[string]Pin{
		"orchestrator":              {Machine: "orchestrator"},
		" orchestrator/ana@github ": {Machine: "orchestrator", User: "ana@github"},
		"laptop.otter-pike.ts.net":  {Machine: "laptop.otter-pike.ts.net"},
		"m/a/b":                     {Machine: "m", User: "a/b"},
	} {
		got, err := ParsePin(in)
		if err != nil || got != want {
			t.Errorf("ParsePin(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, err := ParsePin(got.String()); err != nil || again != got {
			t.Errorf("round trip of %+v: %+v, %v", got, again, err)
		}
	}
	for in, reason := range map[string]string{
		"":                  "machine name is empty",
		"/ana@github":       "machine name is empty",
		"orchestrator/":     "user after '/' is empty",
		"orch estrator":     "space or control",
		"orchestrator/a\tb": "space or control",
	} {
		_, err := ParsePin(in)
		if !errors.Is(err, ErrBadPin) || !strings.Contains(err.Error(), reason) {
			t.Errorf("ParsePin(%q) err = %v, want ErrBadPin saying %q", in, err, reason)
		}
	}
}
