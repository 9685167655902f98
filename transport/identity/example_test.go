package identity_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"example.com/pifleet/transport/identity"
)

// A static map stands in for tailscale on loopback; binaries warn when one
// is in force.
func ExampleParseStatic() {
	who, err := identity.ParseStatic("127.0.0.1=server/ana@github,127.0.0.2=buildbox")
	if err != nil {
		fmt.Println(err)
		return
	}
	if identity.IsStatic(who) {
		fmt.Println("WARNING: static identity map in force:", who.Entries())
	}
	// Dual-stack listeners report IPv4 peers as ::ffff:a.b.c.d.
	id, err := who.Whois(context.Background(), netip.MustParseAddr("::ffff:127.0.0.1"))
	fmt.Println(id, err)
	_, err = who.Whois(context.Background(), netip.MustParseAddr("127.0.0.9"))
	fmt.Println(err)
	// Output:
	// WARNING: static identity map in force: [127.0.0.1=server/ana@github 127.0.0.2=buildbox]
	// server (ana@github) <nil>
	// identity: unknown peer: 127.0.0.9 is not in the static identity map
}

// Tailscale runs the tailscale CLI; here its Runner replays a recorded
// answer instead of running a real process.
func ExampleTailscale_Whois() {
	recorded := `{"Node":{"Name":"buildbox.tail1234.ts.net.","ComputedName":"buildbox"},
	              "UserProfile":{"LoginName":"ana@github","DisplayName":"Ana"},"CapMap":null}`
	ts := &identity.Tailscale{
		Binary: "tailscale",
		Run: func(_ context.Context, bin string, args ...string) (identity.Output, error) {
			fmt.Println("runs:", bin, args)
			return identity.Output{Stdout: []byte(recorded)}, nil
		},
	}
	id, err := ts.Whois(context.Background(), netip.MustParseAddr("100.87.12.34"))
	fmt.Println(id.Machine, id.User, err)
	// Output:
	// runs: tailscale [whois --json 100.87.12.34]
	// buildbox ana@github <nil>
}

// A Cache asks the Whois behind it once per address and reuses the answer
// for a while: here 3 questions cost 1 lookup.
func ExampleCache() {
	lookups := 0
	slow := identity.WhoisFunc(func(ctx context.Context, addr netip.Addr) (identity.Identity, error) {
		lookups++ // a tailscale process, say
		return identity.Identity{Machine: "buildbox", User: "ana@github"}, nil
	})
	who := identity.NewCache(slow, identity.WithLifetimes(time.Minute, 5*time.Second))
	for range 3 {
		id, err := who.Whois(context.Background(), netip.MustParseAddr("100.87.12.34"))
		fmt.Println(id, err)
	}
	fmt.Println("lookups:", lookups)
	// Output:
	// buildbox (ana@github) <nil>
	// buildbox (ana@github) <nil>
	// buildbox (ana@github) <nil>
	// lookups: 1
}
