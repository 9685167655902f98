//go:build linux

package rawio_test

import (
	"fmt"
	"net"
	"os"

	"example.com/pifleet/internal/rawio"
)

// A unix socket pair read and written raw; where New returns nil the
// descriptor is used as it is.
func Example() {
	dir, _ := os.MkdirTemp("", "rawio")
	defer os.RemoveAll(dir)
	ln, _ := net.Listen("unix", dir+"/s")
	defer ln.Close()
	client, _ := net.Dial("unix", dir+"/s")
	defer client.Close()
	server, _ := ln.Accept()
	defer server.Close()

	w, r := rawio.New(client.(*net.UnixConn)), rawio.New(server.(*net.UnixConn))
	_, _ = w.Write([]byte("hello"))
	buf := make([]byte, 16)
	n, _ := r.Read(buf)
	fmt.Println(string(buf[:n]))
	// Output: hello
}
