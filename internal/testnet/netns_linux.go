//go:build linux

package testnet

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
)

// Namespace is a network namespace of a test's own, joined to the host by
// a veth pair with the two addresses of a /30, so that a test can reach an
// address that is genuinely not loopback, or cut a link, without touching
// the host's own network.
type Namespace struct {
	Name   string // as ip netns names it
	Link   string // the namespace's end of the veth pair
	HostIP string // the address of the host's end
	IP     string // the address of the namespace's end
}

// NewNamespace makes a Namespace whose /30 is in 10.second.0.0/16 (each
// package that makes namespaces takes a second octet of its own, so that
// tests running at once in different processes do not share a subnet).
// It is removed at cleanup, its veth pair with it. The test is skipped
// where namespaces cannot be made (not root, or no ip command).
func NewNamespace(t *testing.T, second int) Namespace {
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
	tag := fmt.Sprintf("%d%s", second, hex.EncodeToString(b[:]))
	host := "ph" + tag
	third, fourth := int(b[0]), int(b[1])&^3 // a /30: .x+1 and .x+2
	n := Namespace{
		Name:   "pifleet-" + tag,
		Link:   "pn" + tag,
		HostIP: fmt.Sprintf("10.%d.%d.%d", second, third, fourth+1),
		IP:     fmt.Sprintf("10.%d.%d.%d", second, third, fourth+2),
	}
	run := func(args ...string) error {
		out, err := exec.Command(ip, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("netns", "add", n.Name); err != nil {
		t.Skipf("cannot make a network namespace here: %v", err)
	}
	t.Cleanup(func() {
		_ = run("link", "del", host) // gone already when the namespace took it along
		if err := run("netns", "del", n.Name); err != nil {
			t.Errorf("removing the test's namespace: %v", err)
		}
	})
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", n.Link},
		{"link", "set", n.Link, "netns", n.Name},
		{"addr", "add", n.HostIP + "/30", "dev", host},
		{"link", "set", host, "up"},
		{"-n", n.Name, "addr", "add", n.IP + "/30", "dev", n.Link},
		{"-n", n.Name, "link", "set", n.Link, "up"},
		{"-n", n.Name, "link", "set", "lo", "up"},
	} {
		if err := run(args...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// Do runs f on a thread that joined the namespace, and returns once f
// did: the sockets f makes are the namespace's (a socket stays in the
// namespace it was made in, whichever thread uses it later). The thread
// is never used again: it ends with f's goroutine.
func (n Namespace) Do(f func()) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		nsFile, err := os.Open("/var/run/netns/" + n.Name)
		if err != nil {
			done <- err
			return
		}
		defer nsFile.Close()
		if err := unix.Setns(int(nsFile.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns %s: %w", n.Name, err)
			return
		}
		f()
		done <- nil
	}()
	return <-done
}
