package trust_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// The server's side: first contact asks once, the answer is stored, and
// the next connection of the same machine is decided without asking.
func ExampleServerGate() {
	dir, _ := os.MkdirTemp("", "pifleet-trust-example")
	defer os.RemoveAll(dir)

	// Ana answers on the terminal: "y" for buildbox.
	var screen strings.Builder
	ask := trust.NewTerminal(strings.NewReader("y\n"), &screen)
	store, err := trust.Open(filepath.Join(dir, "server.db"), trust.WithPrompter(ask))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	whois, _ := identity.ParseStatic("127.0.0.2=buildbox/ana@github")
	gate := trust.ServerGate(whois, store)
	ctx := context.Background()

	id, policy, err := gate(ctx, netip.MustParseAddrPort("127.0.0.2:50123"))
	fmt.Println(id, policy, err)
	fmt.Println(strings.Count(screen.String(), "wants to join"), "question asked")

	// The next connection is decided from the store.
	_, policy, _ = gate(ctx, netip.MustParseAddrPort("127.0.0.2:50124"))
	fmt.Println(policy, strings.Count(screen.String(), "wants to join"), "question asked")

	// allow may spawn but not steer.
	fmt.Println(trust.Check(id, policy, trust.OpSpawn))
	fmt.Println(trust.Check(id, policy, trust.Operation{Name: "prompt", Kind: trust.Steering}))

	// An unidentified peer is refused before any frame.
	_, _, err = gate(ctx, netip.MustParseAddrPort("127.0.0.9:50125"))
	fmt.Println(errors.Is(err, trust.ErrRefused))
	// Output:
	// buildbox (ana@github) allow <nil>
	// 1 question asked
	// allow 1 question asked
	// <nil>
	// trust: prompt on buildbox (ana@github) refused: policy is "allow" (steering needs "steer")
	// true
}

// The operator's side: `trust set` and `trust list`.
func ExampleStore_List() {
	dir, _ := os.MkdirTemp("", "pifleet-trust-example")
	defer os.RemoveAll(dir)
	now := func() time.Time { return time.Date(2026, 3, 1, 18, 0, 0, 0, time.UTC) }
	store, err := trust.Open(filepath.Join(dir, "server.db"), trust.WithClock(now))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	policy, _ := trust.ParsePolicy("steer")
	store.Set("buildbox", policy)
	store.Set("ci-runner-3", trust.Deny)
	list, _ := store.List()
	for _, d := range list {
		fmt.Println(d.Machine, d.Policy, d.DecidedAt.Format(time.RFC3339))
	}
	// Output:
	// buildbox steer 2026-03-01T18:00:00Z
	// ci-runner-3 deny 2026-03-01T18:00:00Z
}

// The agent's side: only the pinned server gets through, in the shape of
// the transport's accept hook.
func ExamplePin_Hook() {
	whois, _ := identity.ParseStatic("127.0.0.1=orchestrator/ana@github,127.0.0.5=intruder/eve@example.com")
	pin, _ := trust.ParsePin("orchestrator/ana@github")
	var accept func(context.Context, netip.AddrPort) error = pin.Hook(whois)

	fmt.Println(accept(context.Background(), netip.MustParseAddrPort("127.0.0.1:40000")))
	fmt.Println(accept(context.Background(), netip.MustParseAddrPort("127.0.0.5:40001")))
	// Output:
	// <nil>
	// trust: refused connection from 127.0.0.5:40001 (intruder (eve@example.com)): trust: not the pinned server orchestrator/ana@github
}
