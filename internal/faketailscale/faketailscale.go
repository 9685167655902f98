//go:build unix

// Package faketailscale installs a stand-in for the tailscale CLI in
// tests, since tailscaled cannot run here. It is a real process (a shell
// script), so that whatever runs it pays a real process start, and it logs
// every invocation, so that a test can count the lookups a path makes.
//
//	fake := faketailscale.Install(t, map[string]identity.Identity{"127.0.0.1": {Machine: "box", User: "ana@example"}})
//	srv := identity.Tailscale{Binary: fake.Bin}
//	…
//	n := fake.Count(t, "whois")
package faketailscale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"example.com/pifleet/transport/identity"
)

// Fake is an installed stand-in CLI.
type Fake struct {
	// Bin is the script's path: give it as the tailscale binary.
	Bin string
	log string
}

// Install writes a fake tailscale CLI into a test directory. It answers
// `version`; `whois --json IP` with a whois answer for the identities
// given (an IPv4 address as key), else "peer not found" and exit 1; and
// `ip -4` with the first address given (in sorted order). Anything else
// fails with exit 2.
func Install(t testing.TB, peers map[string]identity.Identity) *Fake {
	t.Helper()
	dir := t.TempDir()
	f := &Fake{Bin: filepath.Join(dir, "tailscale"), log: filepath.Join(dir, "calls.log")}
	addrs := make([]string, 0, len(peers))
	for a := range peers {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	var cases strings.Builder
	for _, a := range addrs {
		id := peers[a]
		answer, err := json.Marshal(map[string]any{
			"Node":        map[string]any{"Name": id.Machine + ".tail0000.ts.net.", "ComputedName": id.Machine, "Addresses": []string{a + "/32"}},
			"UserProfile": map[string]any{"LoginName": id.User, "DisplayName": id.User},
		})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "whois-"+a+".json")
		if err := os.WriteFile(p, answer, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&cases, "\t%s) cat %q ;;\n", a, p)
	}
	first := "100.64.0.1"
	if len(addrs) > 0 {
		first = addrs[0]
	}
	script := fmt.Sprintf(`#!/bin/sh
# faketailscale: a stand-in tailscale CLI for pifleet tests.
echo "$*" >>%q
case "$1" in
version) echo "1.80.3"; echo "  tailscale commit: fake" ;;
ip) echo %q ;;
whois)
	case "$3" in
%s	*) echo "peer not found: $3" >&2; exit 1 ;;
	esac ;;
*) echo "unknown command: $1" >&2; exit 2 ;;
esac
`, f.log, first, cases.String())
	if err := os.WriteFile(f.Bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// Calls returns the argument lists the CLI was run with so far, in order.
func (f *Fake) Calls(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(f.log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Count is how many runs had command cmd ("whois", "status", …).
func (f *Fake) Count(t testing.TB, cmd string) int {
	t.Helper()
	n := 0
	for _, c := range f.Calls(t) {
		if c == cmd || strings.HasPrefix(c, cmd+" ") {
			n++
		}
	}
	return n
}
