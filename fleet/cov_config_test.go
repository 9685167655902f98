package fleet_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet"
)

// TestEveryConfigFieldIsValidated: each out-of-range option of New is a
// *ConfigError naming that field (its With… setter is what sets it), and
// the message says which field and why.
func TestEveryConfigFieldIsValidated(t *testing.T) {
	dir := t.TempDir()
	badDialer := fleet.DefaultDialerConfig()
	badDialer.MinRetryInterval = 0
	tailnet := fleet.WithTailnet(FakeTailnet{})
	for _, tc := range []struct {
		field string
		opts  []fleet.Option
	}{
		{"StateDir", nil},
		{"HelloTimeout", []fleet.Option{fleet.WithHelloTimeout(0)}},
		{"ConnectTimeout", []fleet.Option{fleet.WithConnectTimeout(-time.Second)}},
		{"SpawnTimeout", []fleet.Option{fleet.WithSpawnTimeout(0)}},
		{"AbortTimeout", []fleet.Option{func(c *fleet.Config) { c.AbortTimeout = 0 }}},
		{"TailBuffer", []fleet.Option{fleet.WithTailBuffer(0)}},
		{"TailnetInterval", []fleet.Option{tailnet, fleet.WithTailnetInterval(0)}},
		{"TailnetPort", []fleet.Option{tailnet, fleet.WithTailnetPort(70000)}},
		{"TailnetPort", []fleet.Option{tailnet, fleet.WithTailnetPort(0)}},
		{"Whois", []fleet.Option{fleet.WithInbound("127.0.0.1:0")}},
		{"Agents", []fleet.Option{fleet.WithAgents(fleet.Agent{Name: "a"})}},
		{"Agents", []fleet.Option{fleet.WithAgents(fleet.Agent{Addresses: []string{"h:1"}})}},
	} {
		opts := tc.opts
		if tc.field != "StateDir" {
			opts = append([]fleet.Option{fleet.WithStateDir(dir)}, opts...)
		}
		_, err := fleet.New(opts...)
		var ce *fleet.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: New = %v, want a *ConfigError for %s", tc.field, err, tc.field)
			continue
		}
		if !errors.Is(err, fleet.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) || ce.Reason == "" {
			t.Errorf("%s: error %q does not name the field and reason, or is not ErrInvalidConfig", tc.field, err)
		}
	}
	// A tailnet port or interval is only checked when there is a tailnet.
	if f, err := fleet.New(fleet.WithStateDir(t.TempDir()), fleet.WithTailnetPort(0), fleet.WithTailnetInterval(0)); err != nil {
		t.Errorf("tailnet settings without a tailnet: %v", err)
	} else {
		_ = f.Close()
	}
	_, err := fleet.New(fleet.WithStateDir(dir), fleet.WithDialer(badDialer))
	if !errors.Is(err, fleet.ErrInvalidConfig) || !strings.Contains(err.Error(), "dialer") {
		t.Errorf("bad dialer: New = %v, want ErrInvalidConfig naming the dialer", err)
	}
}

// TestParseAgentNamesTheBadAddress: a malformed address of an entry is a
// *ConfigError quoting it.
func TestParseAgentNamesTheBadAddress(t *testing.T) {
	_, err := fleet.ParseAgent("box=127.0.0.1:9788,nohost")
	if !errors.Is(err, fleet.ErrInvalidConfig) || !strings.Contains(err.Error(), `"nohost"`) {
		t.Fatalf("ParseAgent = %v, want ErrInvalidConfig quoting the bad address", err)
	}
	a, err := fleet.ParseAgent("box=127.0.0.1:1, [::1]:2")
	if err != nil || a.Name != "box" || len(a.Addresses) != 2 || a.Addresses[1] != "[::1]:2" {
		t.Fatalf("ParseAgent = %+v, %v", a, err)
	}
}

// TestParseAgentTrimsTheName: spaces around the name go, as they do
// around each address, and a name of spaces only is no name.
func TestParseAgentTrimsTheName(t *testing.T) {
	a, err := fleet.ParseAgent(" b = h:1 ")
	if err != nil || a.Name != "b" || !slices.Equal(a.Addresses, []string{"h:1"}) {
		t.Errorf(`ParseAgent(" b = h:1 ") = %+v, %v, want b at h:1`, a, err)
	}
	for _, s := range []string{" = h:1", "\t=h:1"} {
		var bad *fleet.ConfigError
		if _, err := fleet.ParseAgent(s); !errors.As(err, &bad) || !strings.Contains(err.Error(), "NAME=HOST:PORT") {
			t.Errorf("ParseAgent(%q) = %v, want a *ConfigError asking for NAME=HOST:PORT", s, err)
		}
	}
}

// TestRegistryURLOverridesTheListenerAddress: agents are told the URL
// the operator gave (a proxy, a tailnet name), not the listener's address.
func TestRegistryURLOverridesTheListenerAddress(t *testing.T) {
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, nil, fleet.WithRegistryURL("https://bundles.example.test"))
	if got := tf.RegistryURL(); got != "https://bundles.example.test" {
		t.Fatalf("RegistryURL = %q", got)
	}
	tf2 := startFleet(t, t.TempDir(), reg, nil)
	if got := tf2.RegistryURL(); !strings.HasPrefix(got, "http://127.0.0.1:") {
		t.Fatalf("RegistryURL without an override = %q, want the listener's address", got)
	}
}
