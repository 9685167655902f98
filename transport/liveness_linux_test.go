package transport

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"example.com/pifleet/internal/testnet"
)

// readAhead stands for a wrapper that exposes its socket (the key
// handshake's read-ahead buffer): socket options go through it.
type readAhead struct{ net.Conn }

func (r readAhead) NetConn() net.Conn { return r.Conn }

// WatchTCP sets the TCP user timeout to the expiry and keepalive probes
// to the heartbeat interval (the defaults: 45 s, every 15 s, 3), through
// a wrapper that exposes its socket.
func TestWatchTCPSetsTheSocketOptions(t *testing.T) {
	client, _ := tcpPair(t)
	nc := readAhead{client}
	if !CanWatchTCP(nc) {
		t.Fatal("CanWatchTCP says no for a TCP socket behind a NetConn wrapper")
	}
	c := NewConn(nc, Options{})
	defer c.Close()
	if err := c.WatchTCP(); err != nil {
		t.Fatal(err)
	}
	raw, err := client.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		name       string
		level, opt int
		want       int
	}{
		{"TCP_USER_TIMEOUT (ms)", unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, 45000},
		{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE (s)", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, 15},
		{"TCP_KEEPINTVL (s)", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, 15},
		{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT, 3},
	} {
		var got int
		var gerr error
		if err := raw.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), o.level, o.opt) }); err != nil || gerr != nil {
			t.Fatalf("%s: %v %v", o.name, err, gerr)
		}
		if got != o.want {
			t.Errorf("%s = %d, want %d", o.name, got, o.want)
		}
	}
}

// An agent connection that TCP watches stays open however long its
// server is silent (the server sends no heartbeats), also after a frame
// came (which would have re-armed an expiry), while its own heartbeats go
// on. The clocks are connections with the same expiry, or twice it,
// opened after: they expire, the watched one does not.
func TestWatchTCPOutlivesTheExpiry(t *testing.T) {
	const expiry = 100 * time.Millisecond
	agentEnd, serverEnd := tcpPair(t)
	heard := newBeatCounter(3)
	server := NewConn(serverEnd, Options{HeartbeatInterval: time.Hour, ExpiryTimeout: failsafe, OnHeartbeat: heard.beat})
	defer server.Close()
	server.StopHeartbeats()
	agent := NewConn(agentEnd, Options{HeartbeatInterval: 10 * time.Millisecond, ExpiryTimeout: expiry})
	defer agent.Close()
	if err := agent.WatchTCP(); err != nil {
		t.Fatal(err)
	}
	outlive := func(after time.Duration) {
		t.Helper()
		clockEnd, _ := tcpPair(t)
		clock := NewConn(clockEnd, Options{HeartbeatInterval: time.Hour, ExpiryTimeout: after})
		waitDone(t, clock)
		wantReason(t, clock, ReasonExpired)
		if err := agent.Err(); err != nil {
			t.Fatalf("the watched connection closed: %v", err)
		}
	}
	outlive(expiry)

	if err := server.TrySend(&ErrorFrame{Code: "still", Message: "here"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), failsafe)
	defer cancel()
	f, err := agent.Receive(ctx)
	if err != nil {
		t.Fatalf("the watched connection received nothing: %v", err)
	}
	if e, ok := f.(*ErrorFrame); !ok || e.Code != "still" {
		t.Fatalf("received %#v", f)
	}
	outlive(2 * expiry)
	heard.wait(t, "the silent server")
}

// The fault the TCP watch is for: the server's machine vanishes from the
// network (its link goes down: no reset, no end of stream, nothing). The
// agent's connection, whose server sent no heartbeats, closes within the
// TCP user timeout of its next unacknowledged heartbeat; a connection to
// the same server without the watch and without an expiry is still open
// then (TCP alone would retry for many minutes). The server sits in a
// network namespace of the test's own behind a veth pair.
func TestWatchTCPNoticesAServerThatVanished(t *testing.T) {
	ns := testnet.NewNamespace(t, 232)
	ln := listenIn(t, ns, ns.IP+":0")
	dial := func() (agentEnd, serverEnd net.Conn) {
		t.Helper()
		agentEnd, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		serverEnd, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { agentEnd.Close(); serverEnd.Close() })
		return agentEnd, serverEnd
	}
	const userTimeout = 2 * time.Second
	open := func(watch bool) (agent *Conn, heard *beatCounter) {
		agentEnd, serverEnd := dial()
		heard = newBeatCounter(2)
		server := NewConn(serverEnd, Options{ExpiryTimeout: time.Hour, OnHeartbeat: heard.beat})
		t.Cleanup(func() { server.Close() })
		server.StopHeartbeats()
		opts := Options{HeartbeatInterval: 200 * time.Millisecond, ExpiryTimeout: userTimeout}
		if !watch {
			opts.ExpiryTimeout = time.Hour
		}
		agent = NewConn(agentEnd, opts)
		t.Cleanup(func() { agent.Close() })
		if watch {
			if err := agent.WatchTCP(); err != nil {
				t.Fatal(err)
			}
		}
		return agent, heard
	}
	watched, heardWatched := open(true)
	unwatched, heardUnwatched := open(false)
	heardWatched.wait(t, "the server of the watched connection")
	heardUnwatched.wait(t, "the server of the unwatched connection")

	if out, err := exec.Command("ip", "-n", ns.Name, "link", "set", ns.Link, "down").CombinedOutput(); err != nil {
		t.Fatalf("cutting the server off: %v: %s", err, out)
	}
	cut := time.Now()
	waitDone(t, watched)
	t.Logf("closed %v after the cut: %v", time.Since(cut).Round(time.Millisecond), watched.Err())
	wantReason(t, watched, ReasonExpired) // the watch's expiry, not a failure of the link
	if !errors.Is(watched.Err(), syscall.ETIMEDOUT) {
		t.Errorf("closed with %v, want the TCP user timeout (connection timed out)", watched.Err())
	}
	if err := unwatched.Err(); err != nil {
		t.Errorf("the unwatched connection closed too (%v): the test shows nothing", err)
	}
}

// listenIn listens on addr inside the namespace ns.
func listenIn(t *testing.T, ns testnet.Namespace, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	if nerr := ns.Do(func() { ln, err = net.Listen("tcp", addr) }); nerr != nil {
		t.Fatal(nerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
