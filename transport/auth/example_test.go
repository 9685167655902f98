package auth_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
)

// An agent accepts a server's connection only once the server proved the
// key the agent trusts, over this very connection.
func Example() {
	dir, _ := os.MkdirTemp("", "auth-example")
	defer os.RemoveAll(dir)
	ring, _ := auth.LoadOrCreate(filepath.Join(dir, "server.key")) // created 0600 on first use
	trusted := []ed25519.PublicKey{ring.Public()}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() { // the server dials and greets
		nc, _ := net.Dial("tcp", ln.Addr().String())
		defer nc.Close()
		dec := transport.NewDecoder(nc)
		f, _ := dec.Decode()
		hello := &transport.HelloFrame{Machine: "orchestrator", Role: transport.RoleServer, PackageVersion: "v1", Platform: "linux"}
		auth.ServerGreeting(hello, f.(*transport.HelloFrame), nc, auth.ServerDialed, ring.Active(time.Now()))
		transport.NewEncoder(nc).Encode(hello)
		dec.Decode() // until the agent hangs up
	}()
	nc, _ := ln.Accept()
	res, err := auth.AgentHandshake(context.Background(), nc, auth.AgentConfig{
		Hello:       &transport.HelloFrame{Machine: "buildbox", Role: transport.RoleAgent, PackageVersion: "v1", Platform: "linux"},
		TrustedKeys: trusted,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Conn.Close()
	fmt.Println("server proved", auth.SameKey(res.ServerKey, ring.Public()))
	// Output: server proved true
}
