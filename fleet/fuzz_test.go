package fleet_test

import (
	"errors"
	"strings"
	"testing"

	"example.com/pifleet/fleet"
)

// FuzzParseAgent: ParseAgent either returns an entry with a name and
// host:port addresses, spaces around each trimmed, or a *ConfigError; it
// never panics.
func FuzzParseAgent(f *testing.F) {
	for _, s := range []string{"box=127.0.0.1:9788", "box=a:1,b:2", "=x:1", "box=", "box", "b=[::1]:9788", " b = h:1 ", " = h:1", "\tbox\t=\th:1", "box = a:1 , b:2", "box= ", "box=a:1,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := fleet.ParseAgent(s)
		if err != nil {
			if !errors.Is(err, fleet.ErrInvalidConfig) {
				t.Fatalf("error %v is not an ErrInvalidConfig", err)
			}
			return
		}
		if a.Name == "" || a.Name != strings.TrimSpace(a.Name) || len(a.Addresses) == 0 || strings.Contains(a.Name, "=") {
			t.Fatalf("ParseAgent(%q) = %+v", s, a)
		}
		for _, addr := range a.Addresses {
			if addr != strings.TrimSpace(addr) {
				t.Fatalf("ParseAgent(%q): address %q is not trimmed", s, addr)
			}
		}
	})
}

func TestConfigIsValidated(t *testing.T) {
	for name, opts := range map[string][]fleet.Option{
		"no state dir":       nil,
		"duplicate agent":    {fleet.WithStateDir(t.TempDir()), fleet.WithAgents(fleet.Agent{Name: "a", Addresses: []string{"h:1"}}, fleet.Agent{Name: "a", Addresses: []string{"h:2"}})},
		"inbound sans whois": {fleet.WithStateDir(t.TempDir()), fleet.WithInbound("127.0.0.1:0")},
		"bad dialer":         {fleet.WithStateDir(t.TempDir()), func(c *fleet.Config) { c.Dialer.MinRetryInterval = 0 }},
	} {
		if _, err := fleet.New(opts...); !errors.Is(err, fleet.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", name, err)
		}
	}
}
