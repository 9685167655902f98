//go:build unix

package agent

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/transport"
)

// notAShim listens on a unix socket and answers every connection with a
// frame header no shim sends: an attach there fails with a protocol error,
// not with "no shim", so whatever serves the socket may still be running
// a worker.
func notAShim(t *testing.T) (socket string, hangUp func()) {
	t.Helper()
	path := filepath.Join(shortDir(t, "ns"), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// After the hello's header, so that the hello is sent
				// whole; kept open until the caller hangs up.
				var hdr [5]byte
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				c.Write(bytes.Repeat([]byte{0xff}, 8))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return path, func() { ln.Close() }
}

// A worker of the previous life that the new agent can neither adopt nor
// stop (its socket answers, but not as a shim) is not known to be gone:
// its handle, the only way to reach it, is kept for the next start to try
// again, whether its spawn was cut short (rolled back) or it was running
// (reported lost). A worker whose shim is plainly not there any more is
// forgotten with its handle, and so are the kept ones at the next start
// once nothing serves their socket.
func TestWorkerNotKnownGoneKeepsItsHandle(t *testing.T) {
	dir := shortDir(t, "pa")
	st, err := agentstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	socket, hangUp := notAShim(t)
	gone := filepath.Join(shortDir(t, "ng"), "none")
	if err := os.MkdirAll(filepath.Join(dir, "handles"), 0o700); err != nil {
		t.Fatal(err)
	}
	handles := newHandleFiles(filepath.Join(dir, "handles"))
	for _, c := range []struct {
		id, socket string
		spawning   bool
	}{
		{"i-aaaaaaaaaaaa", socket, true},
		{"i-bbbbbbbbbbbb", socket, false},
		{"i-cccccccccccc", gone, true},
		{"i-dddddddddddd", gone, false},
	} {
		if _, err := st.PutInstance(agentstore.Instance{InstanceID: c.id, Cwd: t.TempDir(),
			State: transport.InstanceRunning, Spawning: c.spawning}); err != nil {
			t.Fatal(err)
		}
		p := worker.Persisted{InstanceID: c.id, Socket: c.socket, Token: "tok"}
		if err := handles.put(c.id, func() worker.Persisted { return p }); err != nil {
			t.Fatal(err)
		}
	}
	handles.close()
	st.Close()

	h := newHarness(t, hopts{stateDir: dir}) // readopt is done once it listens
	checkHandles(t, dir, map[string]bool{"i-aaaaaaaaaaaa": true, "i-bbbbbbbbbbbb": true, "i-cccccccccccc": false, "i-dddddddddddd": false})
	h.a.Close()
	hangUp()
	newHarness(t, hopts{stateDir: dir})
	checkHandles(t, dir, map[string]bool{"i-aaaaaaaaaaaa": false, "i-bbbbbbbbbbbb": false})
}

// checkHandles fails t unless the handle file of each id is there (true)
// or not (false).
func checkHandles(t *testing.T, dir string, want map[string]bool) {
	t.Helper()
	handles := newHandleFiles(filepath.Join(dir, "handles"))
	defer handles.close()
	for id, kept := range want {
		_, ok, err := handles.get(id)
		if err != nil {
			t.Fatal(err)
		}
		if ok != kept {
			t.Errorf("%s: handle kept = %v, want %v", id, ok, kept)
		}
	}
}
