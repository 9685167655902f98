package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"example.com/pifleet/fleet/catalog"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/fleet/mcpserver"
)

// noFleet is a control API backend with nothing behind it: enough to serve
// the catalogue, which refuses bad arguments before it reaches a fleet.
type noFleet struct{ controlapi.Backend }

// An MCP client lists the tools of a running pifleet-server (served here on
// a unix socket) and gets a refusal it can act on.
func Example() {
	dir, _ := os.MkdirTemp("", "mcp")
	defer os.RemoveAll(dir)
	addr := controlapi.DefaultAddr(dir)
	l, err := controlapi.Listen(addr, controlapi.ListenOptions{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	b := noFleet{}
	go func() {
		served <- controlapi.Serve(ctx, l, controlapi.NewServer(b, controlapi.WithTools(catalog.New(b))), time.Second)
	}()
	defer func() { cancel(); <-served }()

	cl, _ := controlapi.NewClient(addr)
	defer cl.Close()
	s, err := mcpserver.New(ctx, cl)
	if err != nil {
		panic(err)
	}
	serverSide, clientSide := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, serverSide, nil)
	if err != nil {
		panic(err)
	}
	defer ss.Close()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "example"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		panic(err)
	}
	defer session.Close()

	tools, _ := session.ListTools(ctx, nil)
	fmt.Println(len(tools.Tools) > 20, tools.Tools[0].Name) // by name
	res, _ := session.CallTool(ctx, &mcp.CallToolParams{Name: "remote_stop", Arguments: map[string]any{}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// true fleet_baselines
	// true error bad_request: instanceId is required (The worker instance's id (i-…), as remote_spawn returned it or fleet_status lists it.)
	// hint: fix the argument and call again
}
