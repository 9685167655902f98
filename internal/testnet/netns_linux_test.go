//go:build linux

package testnet

import (
	"net"
	"testing"
)

// A listener made in the namespace is reached from the host at the
// namespace's address, over the veth pair.
func TestANamespaceListenerIsReachedAtItsAddress(t *testing.T) {
	ns := NewNamespace(t, 233)
	var ln net.Listener
	var err error
	if derr := ns.Do(func() { ln, err = net.Listen("tcp", ns.IP+":0") }); derr != nil {
		t.Fatal(derr)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	c, err := net.Dial("tcp", net.JoinHostPort(ns.IP, port))
	if err != nil {
		t.Fatalf("dialing the namespace's listener: %v", err)
	}
	defer c.Close()
	if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != ns.HostIP {
		t.Errorf("the connection left from %s, want the host's end of the pair, %s", got, ns.HostIP)
	}
}
