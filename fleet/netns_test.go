//go:build linux

package fleet_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
)

// An agent whose address is not loopback is known only by its whois: the
// SDK without a Whois refuses it (hello.machine is a claim anyone can
// make), and admits it with one. The agent sits in a network namespace of
// the test's own, reached over a veth pair with private addresses, so its
// address is genuinely not loopback; nothing else of the host's network
// is touched.
func TestANonLoopbackAgentNeedsAWhois(t *testing.T) {
	ns, _, agentIP := privateNetns(t)
	peer := peerIn(t, ns, agentIP)
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	agents := []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}}

	t.Run("without a Whois", func(t *testing.T) {
		tf := startFleet(t, t.TempDir(), reg, agents)
		tf.waitUntil(t, "box refused", func(s fleet.Status) bool {
			return len(s.Agents) == 1 && s.Agents[0].State == transport.StateRejected
		})
		st := tf.Status(t.Context()).Agents[0]
		if !strings.Contains(st.LastError, "no Whois to identify "+agentIP) {
			t.Errorf("last error %q, want it to say that no Whois identifies %s", st.LastError, agentIP)
		}
		if _, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/", Bundle: "default"}); err == nil {
			t.Error("a spawn on the refused agent was sent")
		}
	})
	t.Run("with a Whois", func(t *testing.T) {
		whois, err := identity.ParseStatic(agentIP + "=box/ana@example")
		if err != nil {
			t.Fatal(err)
		}
		tf := startFleet(t, t.TempDir(), reg, agents, fleet.WithWhois(whois))
		tf.waitAgent(t, "box", transport.StateEstablished)
		st := tf.Status(t.Context()).Agents[0]
		if st.Machine != "box" || !strings.HasPrefix(st.Addr, agentIP+":") {
			t.Errorf("agent %+v; want machine box at %s", st, agentIP)
		}
	})
}

// privateNetns makes a network namespace of the test's own, joined to the
// host by a veth pair with the addresses of a /30 in 10.231.0.0/16, and
// returns its name and both addresses. Removed at cleanup (the namespace takes its veth
// end along, and the host's end with it). Skipped where namespaces cannot
// be made (not root, or no ip command).
func privateNetns(t *testing.T) (ns, hostIP, nsIP string) {
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
	host, inner := "pfh"+tag, "pfn"+tag
	ns = "pifleet-" + tag
	third, fourth := int(b[0]), int(b[1])&^3 // a /30: .x+1 and .x+2
	hostIP = fmt.Sprintf("10.231.%d.%d", third, fourth+1)
	nsIP = fmt.Sprintf("10.231.%d.%d", third, fourth+2)
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
	return ns, hostIP, nsIP
}

// peerIn starts a test agent peer listening on addr inside network
// namespace ns: its listening socket is made on a thread that joined the
// namespace (a socket stays in the namespace it was made in).
func peerIn(t *testing.T, ns, addr string) *testAgentPeer {
	t.Helper()
	type result struct {
		p   *testAgentPeer
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // this thread ends with the goroutine: it never runs anything else
		nsFile, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer nsFile.Close()
		if err := unix.Setns(int(nsFile.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		done <- result{p: newTestAgentPeerAt(t, addr+":0", "box", true)}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.p
}
