// Package testnet gives tests the network places they need: loopback
// addresses that nothing listens on and that stay free until the test
// uses them, and (on Linux, as root) network namespaces of their own,
// joined to the host by a veth pair (NewNamespace).
//
// The usual way, listening on 127.0.0.1:0, noting the port and closing,
// hands the test a port from the kernel's ephemeral range: the very range
// the kernel picks from for the next listener on port 0 and for every
// outgoing connection's source port. With many tests running at once, the
// freed port is soon taken, and a "refused" dial reaches another test's
// listener, or a server told to listen there later fails with "address
// already in use". The ports here come from below that range, where the
// kernel never picks on its own.
package testnet

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// UnusedAddr returns host:port on the loopback address ip (for example
// "127.0.0.1") with a port below the kernel's ephemeral range that no one
// listens on now. Only another test picking the same port at random can
// take it, and each checks that it is free.
func UnusedAddr(t testing.TB, ip string) string {
	t.Helper()
	low := ephemeralLow()
	const first = 10000
	if low <= first+1000 {
		t.Fatalf("the ephemeral port range starts at %d: no room below it for test ports", low)
	}
	for range 200 {
		port := first + rand.IntN(low-first)
		addr := net.JoinHostPort(ip, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use
		}
		ln.Close()
		return addr
	}
	t.Fatalf("no free port on %s below %d after 200 tries", ip, low)
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default where the file cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}
