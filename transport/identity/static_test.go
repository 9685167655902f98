package identity

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestParseStaticEntry(t *testing.T) {
	good := map[string]struct {
		addr string
		id   Identity
	}{
		"127.0.0.1=server":                   {"127.0.0.1", Identity{Machine: "server"}},
		" 127.0.0.2=buildbox/ana@github ":    {"127.0.0.2", Identity{Machine: "buildbox", User: "ana@github"}},
		"::1=laptop/ben@example.com":         {"::1", Identity{Machine: "laptop", User: "ben@example.com"}},
		"::ffff:127.0.0.3=mapped":            {"127.0.0.3", Identity{Machine: "mapped"}},
		"100.87.12.34=buildbox/ana/github":   {"100.87.12.34", Identity{Machine: "buildbox", User: "ana/github"}},
		"127.0.0.1=laptop.otter-pike.ts.net": {"127.0.0.1", Identity{Machine: "laptop.otter-pike.ts.net"}},
	}
	for in, want := range good {
		addr, id, err := ParseStaticEntry(in)
		if err != nil {
			t.Errorf("ParseStaticEntry(%q): %v", in, err)
			continue
		}
		if addr != netip.MustParseAddr(want.addr) || id != want.id {
			t.Errorf("ParseStaticEntry(%q) = %v, %+v; want %s, %+v", in, addr, id, want.addr, want.id)
		}
	}

	bad := map[string]string{
		"":                          "empty entry",
		"   ":                       "empty entry",
		"127.0.0.1":                 "want IP=MACHINE",
		"buildbox=127.0.0.1":        "bad IP address",
		"127.0.0.1:9788=buildbox":   "bad IP address",
		"fe80::1%eth0=buildbox":     "zone",
		"127.0.0.1=":                "machine name is empty",
		"127.0.0.1=/ana":            "machine name is empty",
		"127.0.0.1=build box":       "machine name contains ' '",
		"127.0.0.1=build=box":       "machine name contains '='",
		"127.0.0.1=buildbox/":       "user after '/' is empty",
		"127.0.0.1=buildbox/a b":    "user contains ' '",
		"127.0.0.1=buildbox/a\x00b": "user contains '\\x00'",
		"127.0.0.1=bu\xffild":       "machine name contains",
	}
	for in, reason := range bad {
		_, _, err := ParseStaticEntry(in)
		if !errors.Is(err, ErrBadEntry) {
			t.Errorf("ParseStaticEntry(%q) err = %v, want ErrBadEntry", in, err)
			continue
		}
		ee, _ := errors.AsType[*EntryError](err)
		if ee.Entry != in || !strings.Contains(err.Error(), reason) {
			t.Errorf("ParseStaticEntry(%q) err = %q, want it to name the entry and say %q", in, err, reason)
		}
	}
}

func TestParseStatic(t *testing.T) {
	s, err := ParseStatic("127.0.0.1=server/ana@github, 127.0.0.2=buildbox", "", "::1=laptop,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1=server/ana@github", "127.0.0.2=buildbox", "::1=laptop"}
	if got := s.Entries(); !slices.Equal(got, want) {
		t.Errorf("Entries = %q, want %q", got, want)
	}

	_, err = ParseStatic("127.0.0.1=server", "::ffff:127.0.0.1=other")
	if !errors.Is(err, ErrBadEntry) || !strings.Contains(err.Error(), `already listed in "127.0.0.1=server"`) {
		t.Errorf("duplicate address: err = %v", err)
	}
	_, err = ParseStatic("127.0.0.1=server,127.0.0.2")
	if ee, ok := errors.AsType[*EntryError](err); !ok || ee.Entry != "127.0.0.2" {
		t.Errorf("bad second entry: err = %v, want it to name 127.0.0.2", err)
	}
}

func TestStaticWhois(t *testing.T) {
	s, err := ParseStatic("127.0.0.2=buildbox/ana@github,::1=laptop")
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.2", "::ffff:127.0.0.2"} {
		id, err := s.Whois(t.Context(), netip.MustParseAddr(addr))
		if err != nil || id != (Identity{Machine: "buildbox", User: "ana@github"}) {
			t.Errorf("Whois(%s) = %+v, %v", addr, id, err)
		}
	}
	if id, err := s.Whois(t.Context(), netip.MustParseAddr("::1")); err != nil || id.Machine != "laptop" || id.User != "" {
		t.Errorf("Whois(::1) = %+v, %v", id, err)
	}
	_, err = s.Whois(t.Context(), netip.MustParseAddr("127.0.0.1"))
	if !errors.Is(err, ErrUnknownPeer) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("unknown: err = %v, want ErrUnknownPeer naming the address", err)
	}
	if _, err := s.Whois(t.Context(), netip.Addr{}); !errors.Is(err, ErrInvalidAddr) {
		t.Errorf("zero address: err = %v", err)
	}
}

func TestIsStatic(t *testing.T) {
	s, _ := ParseStatic("127.0.0.1=server")
	if !IsStatic(s) {
		t.Error("IsStatic(*Static) = false")
	}
	if IsStatic(&Tailscale{}) {
		t.Error("IsStatic(*Tailscale) = true")
	}
	if IsStatic(WhoisFunc(s.Whois)) {
		t.Error("IsStatic(WhoisFunc) = true")
	}
}

func BenchmarkStaticWhois(b *testing.B) {
	s, err := ParseStatic("127.0.0.1=server,127.0.0.2=buildbox/ana@github,::1=laptop")
	if err != nil {
		b.Fatal(err)
	}
	addr := netip.MustParseAddr("::ffff:127.0.0.2")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Whois(b.Context(), addr); err != nil {
			b.Fatal(err)
		}
	}
}
