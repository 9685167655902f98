package fleet_test

import (
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// livenessFailsafe bounds the waits below; reaching it is a failure.
const livenessFailsafe = 10 * time.Second

// heartbeatCount counts heartbeats (transport.Options.OnHeartbeat) and
// closes reached at n.
type heartbeatCount struct {
	n       int64
	got     atomic.Int64
	once    sync.Once
	reached chan struct{}
}

func newHeartbeatCount(n int64) *heartbeatCount {
	return &heartbeatCount{n: n, reached: make(chan struct{})}
}

func (h *heartbeatCount) beat() {
	if h.got.Add(1) == h.n {
		h.once.Do(func() { close(h.reached) })
	}
}

// The server sends no heartbeats to an agent whose hello announced
// tcp-liveness, across many rounds of 10 ms, while it keeps beating a v1
// agent on the same rounds and still hears the first one's heartbeats.
func TestServerSendsNoHeartbeatsToAnAgentThatTCPWatches(t *testing.T) {
	const every = 10 * time.Millisecond
	const rounds = 10
	toQuiet, toV1 := newHeartbeatCount(1), newHeartbeatCount(rounds)
	fromQuiet := newHeartbeatCount(rounds)
	quiet := newTestAgentPeer(t, "quiet", true, func(p *testAgentPeer) {
		p.caps = []string{transport.CapabilityTCPLiveness}
		p.beat = transport.Options{HeartbeatInterval: every, OnHeartbeat: toQuiet.beat}
	})
	v1 := newTestAgentPeer(t, "v1", false, func(p *testAgentPeer) {
		p.beat = transport.Options{HeartbeatInterval: every, OnHeartbeat: toV1.beat}
	})
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{
		{Name: "quiet", Addresses: []string{quiet.Addr()}}, {Name: "v1", Addresses: []string{v1.Addr()}},
	}, fleet.WithConnOptions(transport.Options{HeartbeatInterval: every, OnHeartbeat: fromQuiet.beat}))
	tf.waitAgent(t, "quiet", transport.StateEstablished)
	tf.waitAgent(t, "v1", transport.StateEstablished)

	for what, c := range map[string]*heartbeatCount{"the v1 agent": toV1, "the server (from both agents)": fromQuiet} {
		select {
		case <-c.reached:
		case <-time.After(livenessFailsafe):
			t.Fatalf("%s received %d heartbeats, want %d", what, c.got.Load(), c.n)
		}
	}
	if n := toQuiet.got.Load(); n != 0 {
		t.Errorf("the tcp-liveness agent received %d heartbeats while the v1 one received %d, want none", n, toV1.got.Load())
	}
	if !fleet.AgentConn(tf.Fleet, "quiet").HeartbeatsStopped() || fleet.AgentConn(tf.Fleet, "v1").HeartbeatsStopped() {
		t.Error("heartbeats stopped on the wrong connection")
	}
}

// A real agent and a real fleet agree tcp-liveness: the server stops its
// heartbeats, and the agent, whose expiry is 300 ms, stays connected far
// longer on the same connection, TCP watching it. With either side's
// knob off, both keep beating and the agent stays connected just the
// same (its expiry re-armed by the server's heartbeats).
func TestARealAgentAndFleetAgreeTCPLiveness(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, tc := range []struct {
		name                string
		agentOff, serverOff bool
		announced, agreed   bool
	}{
		{name: "both", announced: true, agreed: true},
		{name: "agent knob off", agentOff: true},
		{name: "server knob off", serverOff: true, announced: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := t.TempDir()
			publish(t, reg, "plain", `{}`)
			const expiry = 300 * time.Millisecond
			addr, _ := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) {
				c.HeartbeatInterval, c.ExpiryTimeout = 50*time.Millisecond, expiry
				c.NoTCPLiveness = tc.agentOff
			})
			opts := []fleet.Option{fleet.WithConnOptions(transport.Options{HeartbeatInterval: 50 * time.Millisecond})}
			if tc.serverOff {
				opts = append(opts, fleet.WithNoTCPLiveness())
			}
			tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{addr}}}, opts...)
			tf.waitAgent(t, "worker-01", transport.StateEstablished)
			st := tf.Status(t.Context()).Agents[0]
			if got := slices.Contains(st.Capabilities, transport.CapabilityTCPLiveness); got != tc.announced {
				t.Errorf("the agent's hello announces tcp-liveness: %v, want %v (%v)", got, tc.announced, st.Capabilities)
			}
			c := fleet.AgentConn(tf.Fleet, "worker-01")
			if got := c.HeartbeatsStopped(); got != tc.agreed {
				t.Errorf("the server's heartbeats stopped: %v, want %v", got, tc.agreed)
			}
			expiryClock(t, 5*expiry)
			if now := fleet.AgentConn(tf.Fleet, "worker-01"); now != c || c.Err() != nil {
				t.Errorf("the agent's connection did not last five of its expiries (now %p, was %p, %v)", now, c, c.Err())
			}
		})
	}
}

// expiryClock returns once a connection that hears nothing has expired
// after d: a clock made of what it measures.
func expiryClock(t *testing.T, d time.Duration) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	far, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	c := transport.NewConn(nc, transport.Options{HeartbeatInterval: time.Hour, ExpiryTimeout: d})
	select {
	case <-c.Done():
	case <-time.After(d + livenessFailsafe):
		t.Fatal("the clock connection did not expire")
	}
}
