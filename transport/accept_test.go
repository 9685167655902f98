package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"example.com/pifleet/internal/netfault"
)

// A refused peer gets nothing at all: no hello, no error frame, just the
// end of the stream.
func TestServerGateRunsBeforeAnyByte(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan netip.AddrPort, 2)
	handled := make(chan *Conn, 1)
	allow := make(chan bool, 2)
	srv := &Server{
		Gate: func(ctx context.Context, remote netip.AddrPort) error {
			seen <- remote
			if !<-allow {
				return ErrDenied
			}
			return nil
		},
		Handle: func(c *Conn) {
			c.Send(context.Background(), &HelloFrame{Machine: "agent-1", Role: RoleAgent, PackageVersion: "0.0.1", Platform: "linux"})
			handled <- c
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()

	// Refused.
	allow <- false
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(failsafe))
	got, err := io.ReadAll(nc)
	if err != nil || len(got) != 0 {
		t.Fatalf("refused peer read %q, %v; want nothing and end of stream", got, err)
	}
	local := nc.LocalAddr().(*net.TCPAddr).AddrPort()
	if remote := <-seen; remote != local {
		t.Errorf("gate saw %s, want the dialler's address %s", remote, local)
	}
	nc.Close()

	// Admitted.
	allow <- true
	nc, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	<-seen
	nc.SetReadDeadline(time.Now().Add(failsafe))
	f, err := NewDecoder(nc).Decode()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*HelloFrame); !ok {
		t.Fatalf("admitted peer got %T, want hello", f)
	}
	c := <-handled
	defer c.Close()

	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
	// Asked of the listener itself: a dial to its old port could reach
	// another test's listener that was given the same port meanwhile.
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("listener not closed after Serve returned: Accept = %v", err)
	}
	if c.Err() != nil {
		t.Error("Serve closed a connection it had handed over")
	}
}

func TestAdmitUnmapsIPv4InIPv6(t *testing.T) {
	ln, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Skip("no IPv6 listener:", err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		nc, err := net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			defer nc.Close()
			io.ReadAll(nc)
		}
	}()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	var got netip.AddrPort
	_, err = Admit(context.Background(), nc, func(_ context.Context, remote netip.AddrPort) error {
		got = remote
		return errors.New("no")
	}, Options{})
	if err == nil {
		t.Fatal("Admit succeeded although the gate refused")
	}
	if !got.Addr().Is4() || got.Addr() != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("gate saw %s, want 127.0.0.1 (unmapped)", got)
	}
}

// Expiry through a stalled network, on real TCP, with short configured
// intervals: both ends notice within their window and report expiry.
func TestConnExpiresThroughStalledProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	proxy, err := netfault.Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()

	fast := Options{HeartbeatInterval: 50 * time.Millisecond, ExpiryTimeout: 250 * time.Millisecond}
	accepted := make(chan *Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		accepted <- NewConn(nc, fast)
	}()
	nc, err := net.Dial("tcp", proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	near := NewConn(nc, fast)
	defer near.Close()
	far := <-accepted
	defer far.Close()

	// Traffic flows through the proxy.
	far.SetHandler(func(f Frame) {
		if s, ok := f.(*StopFrame); ok {
			far.Send(context.Background(), &StoppedFrame{Header: Header{ID: s.ID}, InstanceID: s.InstanceID})
		}
	})
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), failsafe)
		if _, err := near.Request(ctx, &StopFrame{InstanceID: "i"}); err != nil {
			t.Fatalf("request through the proxy: %v", err)
		}
		cancel()
	}

	proxy.Stall(netfault.Both)
	waitDone(t, near)
	waitDone(t, far)
	wantReason(t, near, ReasonExpired)
	wantReason(t, far, ReasonExpired)
}
