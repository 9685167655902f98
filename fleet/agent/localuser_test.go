//go:build linux

package agent

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/transport"
)

// intrude is the test binary run as another local user of the server's
// machine: it connects to the agent at addr, sends a spawn and a list at
// once (as a v1 server would), and prints the type of every frame it
// receives, then "closed" when the agent hangs up. Its first line is its
// uid.
func intrude(addr string) int {
	fmt.Println("uid", os.Getuid())
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	enc := transport.NewEncoder(nc)
	spawn := &transport.SpawnFrame{Cwd: "/tmp", Bundle: "default"}
	spawn.ID = "evil"
	enc.Encode(spawn)
	enc.Encode(&transport.ListFrame{Header: transport.Header{ID: "l"}})
	dec := transport.NewDecoder(bufio.NewReader(nc))
	for {
		f, err := dec.Decode()
		if err != nil {
			if err == io.EOF || strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "closed") {
				fmt.Println("closed")
				return 0
			}
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println(f.FrameType())
	}
}

// The attack: a second, unprivileged Unix user of the pinned
// server's machine connects to the agent's port. It passes the machine pin
// (whois names the machine, never the local user) but holds no server
// key: it receives the agent's hello and nothing else, none of its frames
// is processed, and the connection is closed. The user is created and
// removed by the test, which therefore runs only as root.
func TestAnotherLocalUserCannotGetPastHello(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a second local user needs root: run this test as root (CI does) to see another user refused")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd on this machine: cannot create the second local user")
	}
	name := fmt.Sprintf("pfintr%d", os.Getpid()%100000)
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The test binary, where the other user may run it.
	dir, err := os.MkdirTemp("", "pfintr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "intruder")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}

	h := newHarness(t, hopts{mod: func(c *Config) { c.HandshakeTimeout = 2 * time.Second }})
	cmd := exec.Command(bin, "intruder", h.a.Addr().String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("intruder as %s: %v: %s", name, err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != 4 || got[0] != "uid" || got[1] != u.Uid || got[2] != transport.TypeHello || got[3] != "closed" {
		t.Fatalf("user %s (uid %d) received %q, want its uid, the hello and the close", name, uid, got)
	}
	if ids := h.a.runningIDs(); len(ids) != 0 {
		t.Errorf("the intruder's spawn started %v", ids)
	}
	// The server, holding the key, still gets in.
	h.dial(t).roundTrip("l")
}
