package identity

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseWhoisRecorded(t *testing.T) {
	tests := []struct {
		file string
		want Identity
	}{
		{"whois-buildbox.json", Identity{Machine: "buildbox", User: "ana@github"}},
		// Shared-in nodes: tailscale's ComputedName is the full name, kept
		// as is so that pins written against the TypeScript agent match.
		{"whois-shared.json", Identity{Machine: "laptop.otter-pike.ts.net", User: "ben@example.com"}},
		{"whois-tagged.json", Identity{Machine: "ci-runner-3", User: "tagged-devices"}},
		// No ComputedName: the short host name of Node.Name, never the raw
		// "oldbox.tail1234.ts.net." with its trailing dot.
		{"whois-no-computedname.json", Identity{Machine: "oldbox", User: "ana@github"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseWhois(readTestdata(t, tt.file))
			if err != nil {
				t.Fatalf("ParseWhois: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseWhois = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseWhoisIncomplete(t *testing.T) {
	tests := []struct {
		name, json string
		machine    string
	}{
		{"recorded without UserProfile", string(readTestdata(t, "whois-no-user.json")), "buildbox"},
		{"null", `null`, ""},
		{"empty object", `{}`, ""},
		{"empty login", `{"Node":{"ComputedName":"buildbox"},"UserProfile":{"LoginName":""}}`, "buildbox"},
		{"no node", `{"UserProfile":{"LoginName":"ana@github"}}`, ""},
		{"empty names", `{"Node":{"ComputedName":"","Name":""},"UserProfile":{"LoginName":"ana@github"}}`, ""},
		{"name is only a dot", `{"Node":{"Name":"."},"UserProfile":{"LoginName":"ana@github"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWhois([]byte(tt.json))
			if !errors.Is(err, ErrIncompleteIdentity) {
				t.Fatalf("err = %v, want ErrIncompleteIdentity", err)
			}
			incomplete, ok := errors.AsType[*IncompleteError](err)
			if !ok || incomplete.Machine != tt.machine {
				t.Errorf("err = %#v, want *IncompleteError with machine %q", err, tt.machine)
			}
			if !strings.Contains(err.Error(), "incomplete identity") {
				t.Errorf("message %q does not say incomplete identity", err)
			}
		})
	}
}

func TestParseWhoisMalformed(t *testing.T) {
	for _, in := range []string{``, `{`, `[]`, `"buildbox"`, `{"Node":"buildbox"}`, `{"UserProfile":{"LoginName":7}}`, "{\"Node\":{}}\n{}"} {
		_, err := ParseWhois([]byte(in))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseWhois(%q) err = %v, want ErrMalformed", in, err)
			continue
		}
		if pe, _ := errors.AsType[*ParseError](err); pe.Command != "whois --json" {
			t.Errorf("ParseWhois(%q): command = %q", in, pe.Command)
		}
	}
}

func TestParseStatusRecorded(t *testing.T) {
	got, err := ParseStatus(readTestdata(t, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Status{
		BackendState: "Running",
		Self: Peer{
			HostName: "orchestrator", DNSName: "orchestrator.tail1234.ts.net.", Online: true,
			TailscaleIPs: []netip.Addr{netip.MustParseAddr("100.64.0.10"), netip.MustParseAddr("fd7a:115c:a1e0::a")},
		},
		Peers: []Peer{
			// A peer the CLI reports with its host name only: every other
			// field takes its default.
			{HostName: "ci-runner-3"},
			{
				HostName: "Ana's MacBook Air", DNSName: "ana-mba.tail1234.ts.net.", Online: false,
				TailscaleIPs: []netip.Addr{netip.MustParseAddr("100.101.7.8"), netip.MustParseAddr("fd7a:115c:a1e0::e001:708")},
			},
			{
				HostName: "buildbox", DNSName: "buildbox.tail1234.ts.net.", Online: true,
				TailscaleIPs: []netip.Addr{netip.MustParseAddr("100.87.12.34"), netip.MustParseAddr("fd7a:115c:a1e0::5401:c22")},
			},
		},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("ParseStatus (-want +got):\n%s", diff)
	}
	if !got.Running() {
		t.Error("Running() = false for BackendState Running")
	}
	machines := []string{got.Peers[0].Machine(), got.Peers[1].Machine(), got.Peers[2].Machine()}
	if diff := cmp.Diff([]string{"ci-runner-3", "ana-mba", "buildbox"}, machines); diff != "" {
		t.Errorf("Peer.Machine (-want +got):\n%s", diff)
	}
	if a, ok := got.Peers[2].IPv4(); !ok || a != netip.MustParseAddr("100.87.12.34") {
		t.Errorf("buildbox IPv4 = %v, %v", a, ok)
	}
	if _, ok := got.Peers[0].IPv4(); ok {
		t.Error("a peer without addresses reports an IPv4")
	}
}

func TestParseStatusStoppedAndEmpty(t *testing.T) {
	got, err := ParseStatus([]byte(`{"BackendState":"Stopped","Self":null,"Peer":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Running() || len(got.Peers) != 0 || got.Self.HostName != "" {
		t.Errorf("stopped status = %+v", got)
	}
	got, err = ParseStatus([]byte(`{"Peer":{"nodekey:a":null,"nodekey:b":{"HostName":"b"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Peers) != 1 || got.Peers[0].HostName != "b" {
		t.Errorf("null peer not skipped: %+v", got.Peers)
	}
}

func TestParseStatusRejects(t *testing.T) {
	tests := map[string]string{
		"not json":       `status: running`,
		"peer not obj":   `{"Peer":{"nodekey:a":"buildbox"}}`,
		"bad peer ip":    `{"Peer":{"nodekey:a":{"HostName":"a","TailscaleIPs":["100.64.0.300"]}}}`,
		"bad self ip":    `{"Self":{"TailscaleIPs":["not-an-ip"]}}`,
		"online as text": `{"Peer":{"nodekey:a":{"Online":"yes"}}}`,
	}
	for name, in := range tests {
		_, err := ParseStatus([]byte(in))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	_, err := ParseStatus([]byte(`{"Peer":{"nodekey:a":{"TailscaleIPs":["bogus"]}}}`))
	if err == nil || !strings.Contains(err.Error(), "Peer[nodekey:a]") {
		t.Errorf("error %v does not name the peer", err)
	}
}

func TestParseIPv4(t *testing.T) {
	good := map[string]string{
		"100.87.12.34\n":                    "100.87.12.34",
		"100.87.12.34":                      "100.87.12.34",
		"  100.87.12.34\r\n":                "100.87.12.34",
		"100.87.12.34\nfd7a:115c:a1e0::1":   "100.87.12.34",
		string(readTestdata(t, "ip-4.txt")): "100.87.12.34",
	}
	for in, want := range good {
		got, err := ParseIPv4([]byte(in))
		if err != nil || got != netip.MustParseAddr(want) {
			t.Errorf("ParseIPv4(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n\n", "fd7a:115c:a1e0::1\n", "no address\n", "::ffff:100.64.0.1"} {
		if _, err := ParseIPv4([]byte(in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseIPv4(%q) err = %v, want ErrMalformed", in, err)
		}
	}
}

func TestShortName(t *testing.T) {
	for in, want := range map[string]string{
		"buildbox.tail1234.ts.net.": "buildbox",
		"buildbox.tail1234.ts.net":  "buildbox",
		"buildbox":                  "buildbox",
		"buildbox.":                 "buildbox",
		"":                          "",
		".":                         "",
	} {
		if got := ShortName(in); got != want {
			t.Errorf("ShortName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIdentityString(t *testing.T) {
	if got := (Identity{Machine: "buildbox", User: "ana@github"}).String(); got != "buildbox (ana@github)" {
		t.Errorf("String = %q", got)
	}
	if got := (Identity{Machine: "buildbox"}).String(); got != "buildbox" {
		t.Errorf("String without user = %q", got)
	}
}

func BenchmarkParseWhois(b *testing.B) {
	data := readTestdata(b, "whois-buildbox.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseWhois(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseStatus(b *testing.B) {
	data := readTestdata(b, "status.json")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseStatus(data); err != nil {
			b.Fatal(err)
		}
	}
}
