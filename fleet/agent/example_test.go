package agent_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"os"
	"time"

	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// An agent on loopback that admits only the server "orchestrator" (a
// static identity map stands in for tailscale whois) holding the server
// key it trusts, and what that server receives.
func Example() {
	stateDir, _ := os.MkdirTemp("", "agent-example")
	defer os.RemoveAll(stateDir)
	whois, _ := identity.ParseStatic("127.0.0.1=orchestrator")
	serverKey, _ := auth.LoadOrCreate(stateDir + "/server.key") // the server's, normally on its machine
	a, err := agent.New(agent.Config{
		Machine:      "buildbox",
		Listen:       "127.0.0.1:0",
		Pin:          trust.Pin{Machine: "orchestrator"},
		Whois:        whois,
		ServerKeys:   []ed25519.PublicKey{serverKey.Public()},
		StateDir:     stateDir,
		SessionsRoot: stateDir + "/sessions",
		ShimCommand:  []string{"pifleet-agent", "shim"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx)
	<-a.Ready()

	nc, err := net.Dial("tcp", a.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	dec := transport.NewDecoder(nc)
	f, _ := dec.Decode()
	hello := f.(*transport.HelloFrame)
	fmt.Println(hello.FrameType(), hello.Machine, hello.Role, hello.Platform == agent.Platform())
	// Nothing else comes until the server proves its key over this
	// connection.
	mine := &transport.HelloFrame{Machine: "orchestrator", Role: transport.RoleServer, PackageVersion: "v1", Platform: "linux"}
	auth.ServerGreeting(mine, hello, nc, auth.ServerDialed, serverKey.Active(time.Now()))
	transport.NewEncoder(nc).Encode(mine)
	f, _ = dec.Decode()
	fmt.Println(f.FrameType()) // the agent's own proof
	f, _ = dec.Decode()
	report := f.(*transport.SessionsReportFrame)
	fmt.Println(report.FrameType(), report.Full, len(report.Sessions))

	nc.Close()
	a.Close()
	// Output:
	// hello buildbox agent true
	// auth_proof
	// sessions_report true 0
}
