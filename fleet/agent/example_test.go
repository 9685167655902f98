package agent_test

import (
	"context"
	"fmt"
	"net"
	"os"

	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// An agent on loopback that admits only the server "orchestrator" (a
// static identity map stands in for tailscale whois), and what that
// server receives first.
func Example() {
	stateDir, _ := os.MkdirTemp("", "agent-example")
	defer os.RemoveAll(stateDir)
	whois, _ := identity.ParseStatic("127.0.0.1=orchestrator")
	a, err := agent.New(agent.Config{
		Machine:      "buildbox",
		Listen:       "127.0.0.1:0",
		Pin:          trust.Pin{Machine: "orchestrator"},
		Whois:        whois,
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
	f, _ = dec.Decode()
	report := f.(*transport.SessionsReportFrame)
	fmt.Println(report.FrameType(), report.Full, len(report.Sessions))

	nc.Close()
	a.Close()
	// Output:
	// hello buildbox agent true
	// sessions_report true 0
}
