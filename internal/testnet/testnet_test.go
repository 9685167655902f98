package testnet_test

import (
	"net"
	"strconv"
	"testing"

	"example.com/pifleet/internal/testnet"
)

func TestUnusedAddrIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	for range 20 {
		addr := testnet.UnusedAddr(t, "127.0.0.1")
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if port, _ := strconv.Atoi(p); port < 10000 || port >= 32768 && port < 61000 {
			t.Errorf("port %d: want one below the ephemeral range", port)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		ln.Close()
	}
}
