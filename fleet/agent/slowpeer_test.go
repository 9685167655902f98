//go:build unix

package agent

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
)

// stallConn is a client's socket whose reads can be stopped: the test's
// server then stops reading, as a hung or overloaded server does, while
// its socket stays open.
type stallConn struct {
	net.Conn
	mu      sync.Mutex
	stalled chan struct{} // non-nil while stalled; closed to resume
}

func (c *stallConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	ch := c.stalled
	c.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return c.Conn.Read(p)
}

func (c *stallConn) stall() {
	c.mu.Lock()
	c.stalled = make(chan struct{})
	c.mu.Unlock()
}

func (c *stallConn) resume() {
	c.mu.Lock()
	if c.stalled != nil {
		close(c.stalled)
		c.stalled = nil
	}
	c.mu.Unlock()
}

// dialStalling connects as a pifleet server with a small receive buffer
// (so that the kernel holds little of what the agent sends) and returns
// the client and the switch that stops its reads.
func dialStalling(t *testing.T, addr string) (*client, *stallConn) {
	t.Helper()
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	sc := &stallConn{Conn: nc}
	c := newClient(t, sc, &greeting{key: testServerKey, caps: []string{transport.CapabilityPifleet}}, auth.ServerDialed)
	t.Cleanup(sc.resume)
	return c, sc
}

// A server connection that stops reading holds back nobody's events (the
// broadcast used to wait on each peer in turn, so one stalled connection
// stalled every server for up to 45 s), and the agent does not buffer for
// it without bound: once it is past its byte budget it is dropped, while
// the healthy server keeps getting every event of every run. The stall
// timeout is an hour here, so only the budget can drop the stalled peer.
func TestStalledPeerDelaysNoOtherPeer(t *testing.T) {
	dropped := make(chan string, 4)
	h := newHarness(t, hopts{env: []string{"PIFLEET_FAUX_CHUNK=16"}, mod: func(c *Config) {
		c.PeerQueueBytes = 256 << 10
		c.ExpiryTimeout = time.Hour
		c.HeartbeatInterval = time.Hour
	}})
	h.a.hooks.peerDropped = func(key string) { dropped <- key }
	healthy := h.dialPifleet(t)
	inst := healthy.mustSpawn("s1", h.cwd, "default", nil)
	stalled, sc := dialStalling(t, h.a.Addr().String())
	stalled.roundTrip("l1") // admitted and past its replay
	sc.stall()

	// Each run streams about 100 KB of message_update events (the partial
	// message grows by 16 characters per update): the healthy server, which
	// reads each run to its end, never lags by more than that, well within
	// the budget; the stalled one lags by one more run each time.
	text := strings.Repeat("stalled peers must not stall the others. ", 30)
	const maxRuns = 100
	var droppedKey string
	for run := 0; run < maxRuns && droppedKey == ""; run++ {
		healthy.rpc(inst.InstanceID, "", prompt(fmt.Sprintf("p%d", run), "say: "+text))
		// The healthy server sees the run to its end while the stalled
		// one reads nothing: nothing waits for the stalled connection.
		healthy.nextEvent(inst.InstanceID, typeIs("agent_settled"))
		select {
		case droppedKey = <-dropped:
		default:
		}
	}
	if droppedKey == "" {
		t.Fatalf("the stalled connection was not dropped after %d runs of ~100 KB each with a 256 KiB budget", maxRuns)
	}
	// The stalled server, reading again, finds its connection closed by
	// the agent (after what the kernel and the queue held).
	sc.resume()
	select {
	case <-stalled.closed:
	case <-time.After(waitLimit):
		t.Fatal("the dropped connection was not closed")
	}
	// The healthy server is still served.
	healthy.rpc(inst.InstanceID, "", prompt("after", "say: still here"))
	healthy.nextEvent(inst.InstanceID, typeIs("agent_settled"))
	if n := len(h.a.peersSnapshot()); n != 1 {
		t.Errorf("%d connections after the drop, want the healthy one alone", n)
	}
}

// One identity holds at most MaxConnsPerIdentity connections: a further
// one is closed after its handshake and never becomes a peer, and a
// connection that ends frees its place.
func TestConnectionsPerIdentityAreCapped(t *testing.T) {
	gone := make(chan string, 8)
	h := newHarness(t, hopts{mod: func(c *Config) { c.MaxConnsPerIdentity = 2 }})
	h.a.hooks.peerGone = func(key string) { gone <- key }
	c1, c2 := h.dialPifleet(t), h.dialPifleet(t)
	c1.roundTrip("l1")
	c2.roundTrip("l2")
	c3 := h.dialPifleet(t)
	select {
	case <-c3.closed:
	case <-time.After(waitLimit):
		t.Fatal("a third connection of the same identity was kept (cap 2)")
	}
	if n := len(h.a.peersSnapshot()); n != 2 {
		t.Errorf("%d peers, want 2", n)
	}
	c1.close()
	select {
	case <-gone:
	case <-time.After(waitLimit):
		t.Fatal("the agent never saw the first connection go")
	}
	c4 := h.dialPifleet(t)
	c4.roundTrip("l4") // admitted: its place was freed
}
