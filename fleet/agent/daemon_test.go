//go:build unix

package agent

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"example.com/pifleet/transport"
)

// Checklist 2.6 item 66: the pinned server gets hello with the machine
// name and role agent, the real module version, the Node platform name and
// pifleet's capabilities (never exec-v1: the exec plane is not built).
func TestHello_66(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	hello := c.hello()
	if hello.Machine != "worker-01" || hello.Role != transport.RoleAgent {
		t.Fatalf("hello = %+v", hello)
	}
	if hello.PackageVersion != ModuleVersion() || hello.PackageVersion == "0.0.1" {
		t.Errorf("packageVersion %q, want the module version %q", hello.PackageVersion, ModuleVersion())
	}
	if hello.Platform != Platform() || !slices.Contains([]string{"linux", "darwin", "win32"}, hello.Platform) {
		t.Errorf("platform %q", hello.Platform)
	}
	if !slices.Contains(hello.Capabilities, transport.CapabilityPifleet) || slices.Contains(hello.Capabilities, "exec-v1") {
		t.Errorf("capabilities %v", hello.Capabilities)
	}
	// then a full sessions_report (item 120 checks its content)
	r := nextOf[*transport.SessionsReportFrame](c, nil)
	if !r.Full || r.Machine != "worker-01" || r.Sessions == nil {
		t.Errorf("sessions_report = %+v", r)
	}
}

// Items 67 and 68: a peer that is not the pinned server, and a peer whois
// cannot identify, are disconnected without receiving a single byte.
func TestDenyByDefault_67_68(t *testing.T) {
	h := newHarness(t, hopts{static: "127.0.0.1=" + pinned + ",127.0.0.2=intruder"})
	for _, tc := range []struct{ name, from string }{
		{"67 not pinned", "127.0.0.2"},
		{"68 whois fails", "127.0.0.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.from)}}
			nc, err := d.Dial("tcp", h.a.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			// EOF or a reset: either way the connection ends, and no byte
			// may have come before.
			n, _ := io.Copy(io.Discard, nc)
			if n != 0 {
				t.Fatalf("refused peer received %d bytes", n)
			}
		})
	}
	// the pinned server still gets in
	h.dial(t).hello()
}

// Items 69, 70, 72, 73: spawn answers running with a pid and list shows
// it; two rpc commands are answered in order, tagged with the instance id;
// stop of an unknown instance is unknown_instance with the id echoed; a
// cooperative worker stops with forced false and is listed stopped.
func TestSpawnRPCStop_69_70_72_73(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s1", h.cwd, "default", nil)
	if inst.State != transport.InstanceRunning || inst.PID == nil || *inst.PID <= 0 {
		t.Fatalf("spawned %+v", inst)
	}
	if inst.SessionPath == "" || inst.BundleHash == "" || inst.Model == nil || inst.Model.ID != "faux-1" {
		t.Errorf("spawned lacks session/bundleHash/model: %+v", inst)
	}
	l := c.roundTrip("l1")
	if len(l.Instances) != 1 || l.Instances[0].InstanceID != inst.InstanceID || l.Instances[0].State != transport.InstanceRunning {
		t.Fatalf("list = %+v", l.Instances)
	}

	c.rpc(inst.InstanceID, "", map[string]any{"type": "get_state", "id": "a"})
	c.rpc(inst.InstanceID, "", map[string]any{"type": "get_state", "id": "b"})
	var order []string
	for len(order) < 2 {
		f, e := c.nextEvent(inst.InstanceID, func(e event) bool { return e.Type == "response" && (e.ID == "a" || e.ID == "b") })
		if f.InstanceID != inst.InstanceID {
			t.Fatalf("event tagged %q", f.InstanceID)
		}
		order = append(order, e.ID)
	}
	if !slices.Equal(order, []string{"a", "b"}) {
		t.Fatalf("answers in order %v", order)
	}

	st := &transport.StopFrame{InstanceID: "i-000000000000"}
	st.ID = "stop-unknown"
	c.send(st)
	e, ok := c.reply("stop-unknown").(*transport.ErrorFrame)
	if !ok || e.Code != CodeUnknownInstance {
		t.Fatalf("stop unknown = %+v", e)
	}

	st = &transport.StopFrame{InstanceID: inst.InstanceID}
	st.ID = "stop"
	c.send(st)
	stopped := c.reply("stop").(*transport.StoppedFrame)
	if stopped.Forced {
		t.Errorf("cooperative worker stopped forced")
	}
	if stopped.SessionPath == "" {
		t.Errorf("stopped without sessionPath")
	}
	l = c.roundTrip("l2")
	if l.Instances[0].State != transport.InstanceStopped || l.Instances[0].PID != nil {
		t.Fatalf("after stop: %+v", l.Instances[0])
	}
}

// Item 71: the worker's environment carries PI_FLEET_BUNDLE and
// PI_FLEET_INSTANCE_ID.
func TestWorkerEnv_71(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	c.rpc(inst.InstanceID, "", prompt("p", "bash: echo \"$PI_FLEET_BUNDLE:$PI_FLEET_INSTANCE_ID\""))
	_, e := c.nextEvent(inst.InstanceID, typeIs("tool_execution_end"))
	if want := "default:" + inst.InstanceID; !contains(string(e.Result), want) {
		t.Fatalf("tool result %s lacks %q", e.Result, want)
	}
}

// Item 74: a worker that ignores abort, stdin EOF and SIGTERM is killed
// after the grace period and reported forced.
func TestStopForced_74(t *testing.T) {
	h := newHarness(t, hopts{worker: nil, mod: func(c *Config) {
		c.PiCommand = []string{c.ShimCommand[0], "stubborn"}
		c.StopGrace = 100 * time.Millisecond
	}})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "plain", nil)
	st := &transport.StopFrame{InstanceID: inst.InstanceID}
	st.ID = "stop"
	c.send(st)
	if stopped := c.reply("stop").(*transport.StoppedFrame); !stopped.Forced {
		t.Fatal("stubborn worker not reported forced")
	}
}

// Item 75: a silent peer is disconnected after the heartbeat timeout while
// a heartbeating one stays connected and its worker keeps running.
func TestHeartbeatExpiry_75(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) {
		c.HeartbeatInterval = 50 * time.Millisecond
		c.ExpiryTimeout = 400 * time.Millisecond
	}})
	alive := h.dial(t)
	alive.hello()
	stopBeat := make(chan struct{})
	defer close(stopBeat)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-tick.C:
				alive.mu.Lock()
				alive.enc.Encode(&transport.HeartbeatFrame{})
				alive.mu.Unlock()
			}
		}
	}()
	inst := alive.mustSpawn("s", h.cwd, "default", nil)
	silent := h.dial(t)
	silent.hello()
	select {
	case <-silent.closed:
	case <-time.After(waitLimit):
		t.Fatal("silent peer never disconnected")
	}
	l := alive.roundTrip("l")
	if l.Instances[0].InstanceID != inst.InstanceID || l.Instances[0].State != transport.InstanceRunning {
		t.Fatalf("worker after the silent peer left: %+v", l.Instances[0])
	}
}

// Item 76 (AC-3.14): with maxWorkers 1 the second spawn is refused with
// max_workers and the count "1/1"; one instance runs.
func TestMaxWorkers_76(t *testing.T) {
	h := newHarness(t, hopts{mod: func(c *Config) { c.MaxWorkers = 1 }})
	c := h.dial(t)
	c.hello()
	c.mustSpawn("s1", h.cwd, "default", nil)
	e, ok := c.spawn("s2", h.cwd, "default", nil).(*transport.SpawnErrorFrame)
	if !ok || e.Code != CodeMaxWorkers || !contains(e.Message, "1/1") {
		t.Fatalf("second spawn = %+v", e)
	}
	if n := len(h.a.runningIDs()); n != 1 {
		t.Fatalf("%d running", n)
	}
}
