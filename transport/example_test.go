package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	"example.com/pifleet/transport"
)

// Frames are typed structs; the encoder writes what a TypeScript peer's
// schema expects (forced:false present, optional fields absent).
func ExampleMarshalFrame() {
	b, err := transport.MarshalFrame(&transport.StoppedFrame{
		Header:     transport.Header{ID: "r-0123456789ab"},
		InstanceID: "i-1",
	})
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(b)
	// Output:
	// {"v":1,"type":"stopped","id":"r-0123456789ab","instanceId":"i-1","forced":false}
}

// A Decoder reads a JSONL stream; a bad record is an error of its own and
// decoding goes on with the next one.
func ExampleDecoder() {
	stream := strings.Join([]string{
		`{"v":1,"type":"stop","id":"r-1","instanceId":"i-1"}`,
		`{"v":1,"type":"spawn","cwd":"/work"}`,
		`{"v":2,"type":"list"}`,
		`{"v":1,"type":"event","instanceId":"i-1","event":{"type":"agent_end"}}`,
	}, "\r\n") + "\n"
	d := transport.NewDecoder(strings.NewReader(stream))
	for {
		f, err := d.Decode()
		var perr *transport.ProtocolError
		switch {
		case errors.As(err, &perr):
			fmt.Printf("%s: %s\n", perr.Code, perr.Message)
			continue
		case err == io.EOF:
			return
		case err != nil:
			panic(err)
		}
		switch f := f.(type) {
		case *transport.StopFrame:
			fmt.Printf("stop %s (request %s)\n", f.InstanceID, f.ID)
		case *transport.EventFrame:
			fmt.Printf("event from %s: %s\n", f.InstanceID, f.Event)
		}
	}
	// Output:
	// stop i-1 (request r-1)
	// schema_violation: invalid spawn frame: must have required properties bundle
	// unsupported_version: unsupported protocol version: 2 (expected 1)
	// event from i-1: {"type":"agent_end"}
}

// A request goes out with a fresh id and comes back matched to it.
func ExampleConn_Request() {
	server, agent := net.Pipe()
	ids := 0
	c := transport.NewConn(server, transport.Options{
		NewID: func() string { ids++; return fmt.Sprintf("r-%012d", ids) },
	})
	defer c.Close()

	// A minimal agent on the other end: answer list with no instances.
	go func() {
		d, e := transport.NewDecoder(agent), transport.NewEncoder(agent)
		for {
			f, err := d.Decode()
			if err != nil {
				return
			}
			if l, ok := f.(*transport.ListFrame); ok {
				e.Encode(&transport.InstancesFrame{Header: transport.Header{ID: l.ID}})
			}
		}
	}()

	reply, err := c.Request(context.Background(), &transport.ListFrame{})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s %s: %d instances\n", reply.FrameType(), reply.Envelope().ID, len(reply.(*transport.InstancesFrame).Instances))
	// Output:
	// instances r-000000000001: 0 instances
}

// A Redialer keeps a connection to an agent up and reports every step of
// the lifecycle (seed §2).
func ExampleRedialer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	agent := &transport.Server{
		// A gate sees the address before any byte is sent.
		Gate: func(ctx context.Context, remote netip.AddrPort) error {
			if !remote.Addr().IsLoopback() {
				return transport.ErrDenied
			}
			return nil
		},
		Handle: func(c *transport.Conn) {
			c.Send(ctx, &transport.HelloFrame{Machine: "agent-1", Role: transport.RoleAgent, PackageVersion: "0.0.1", Platform: "linux"})
		},
	}
	go agent.Serve(ctx, ln)

	established := make(chan *transport.Conn)
	var d net.Dialer
	r := transport.NewRedialer(transport.RedialConfig{
		Dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", ln.Addr().String()) },
		// Authenticated once the agent's hello arrives.
		Authenticate: func(ctx context.Context, c *transport.Conn) error {
			f, err := c.Receive(ctx)
			if err != nil {
				return err
			}
			if h, ok := f.(*transport.HelloFrame); !ok || h.Machine != "agent-1" {
				return fmt.Errorf("%w: unexpected first frame", transport.ErrDenied)
			}
			return nil
		},
		OnTransition: func(t transport.Transition) {
			fmt.Printf("%s --%s--> %s\n", t.From, t.Event, t.To)
			if t.To == transport.StateEstablished && t.Conn != nil {
				established <- t.Conn
			}
		},
	})
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	<-established
	r.Close()
	fmt.Println("Run:", <-done)
	// Output:
	// connecting --tcpEstablished--> authenticating
	// authenticating --allowed--> established
	// established --close--> closed
	// Run: <nil>
}
