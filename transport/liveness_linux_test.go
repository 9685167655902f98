package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	ns, inner, nsIP := privateNetns(t)
	ln := listenIn(t, ns, nsIP+":0")
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

	if out, err := exec.Command("ip", "-n", ns, "link", "set", inner, "down").CombinedOutput(); err != nil {
		t.Fatalf("cutting the server off: %v: %s", err, out)
	}
	cut := time.Now()
	waitDone(t, watched)
	t.Logf("closed %v after the cut: %v", time.Since(cut).Round(time.Millisecond), watched.Err())
	wantReason(t, watched, ReasonIO)
	if !errors.Is(watched.Err(), syscall.ETIMEDOUT) {
		t.Errorf("closed with %v, want the TCP user timeout (connection timed out)", watched.Err())
	}
	if err := unwatched.Err(); err != nil {
		t.Errorf("the unwatched connection closed too (%v): the test shows nothing", err)
	}
}

// privateNetns makes a network namespace of the test's own, joined to the
// host by a veth pair with the addresses of a /30 in 10.232.0.0/16, and
// returns its name, the name of its veth end and its address. Removed at
// cleanup (the namespace takes both veth ends along). Skipped where
// namespaces cannot be made (not root, or no ip command).
func privateNetns(t *testing.T) (ns, inner, nsIP string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a network namespace")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("needs the ip command (iproute2) to make a network namespace")
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	host := "pth" + tag
	inner, ns = "ptn"+tag, "pifleet-t-"+tag
	third, fourth := int(b[0]), int(b[1])&^3 // a /30: .x+1 and .x+2
	hostIP := fmt.Sprintf("10.232.%d.%d", third, fourth+1)
	nsIP = fmt.Sprintf("10.232.%d.%d", third, fourth+2)
	run := func(args ...string) error {
		out, err := exec.Command(ip, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("netns", "add", ns); err != nil {
		t.Skipf("cannot make a network namespace here: %v", err)
	}
	t.Cleanup(func() {
		_ = run("link", "del", host) // gone already when the namespace took it along
		if err := run("netns", "del", ns); err != nil {
			t.Errorf("removing the test's namespace: %v", err)
		}
	})
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", ns},
		{"addr", "add", hostIP + "/30", "dev", host},
		{"link", "set", host, "up"},
		{"-n", ns, "addr", "add", nsIP + "/30", "dev", inner},
		{"-n", ns, "link", "set", inner, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if err := run(args...); err != nil {
			t.Fatal(err)
		}
	}
	return ns, inner, nsIP
}

// listenIn listens on addr inside network namespace ns: the socket is
// made on a thread that joined the namespace (a socket stays in the
// namespace it was made in), which ends with its goroutine.
func listenIn(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		f, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		done <- result{ln, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.ln.Close() })
	return r.ln
}
