package fleet_test

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/netfault"
	"example.com/pifleet/internal/testnet"
	"example.com/pifleet/transport"
)

// Each edge of the agent connection machine (transport.ConnectionTable) is
// driven here by a real socket on loopback: a port nobody listens on, a
// listener that hangs up at once, one that never says hello, and a fleet
// closed while its agents are in each state that Close can find them in.

// refusedAddr returns a loopback address that refuses connections, and
// stays free until the test listens there itself.
func refusedAddr(t *testing.T) string {
	return testnet.UnusedAddr(t, "127.0.0.1")
}

// proxiedFleet starts a fleet whose one agent, "box", is a test peer
// reached through a netfault proxy (to cut, stall or reset the
// connection), with the bundle "default" published, and waits until the
// agent is established.
func proxiedFleet(t *testing.T, opts ...fleet.Option) (*testFleet, *testAgentPeer, *netfault.Proxy) {
	t.Helper()
	peer := newTestAgentPeer(t, "box", true)
	proxy, err := netfault.Start(peer.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "box", Addresses: []string{proxy.Addr()}}}, opts...)
	tf.waitAgent(t, "box", transport.StateEstablished)
	return tf, peer, proxy
}

// rawListener accepts connections on loopback and hands each to serve
// (which owns it); the connections still open are closed at cleanup.
func rawListener(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			serve(nc)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, nc := range conns {
			nc.Close()
		}
	})
	return ln.Addr().String()
}

// agentChange waits for agent's connection transition ev from → to (of
// any agent when agent is "").
func (tf *testFleet) agentChange(t *testing.T, agent string, ev transport.ConnEvent, from, to transport.ConnState) fleet.Change {
	t.Helper()
	var got fleet.Change
	tf.waitChange(t, agent+" "+string(ev), func(c fleet.Change) bool {
		if c.Kind == fleet.ChangeAgentState && (agent == "" || c.Agent == agent) && c.Event == string(ev) && c.From == string(from) && c.To == string(to) {
			got = c
			return true
		}
		return false
	})
	return got
}

// closedFrom closes the fleet and returns, per agent, the state its
// connection was closed from.
func (tf *testFleet) closedFrom(t *testing.T) map[string]string {
	t.Helper()
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	from := map[string]string{}
	for c := range tf.sub.C { // Close publishes, then closes the subscription
		if c.Kind == fleet.ChangeAgentState && c.Event == string(transport.EventClose) {
			from[c.Agent] = c.From
		}
	}
	return from
}

func TestRefusedDialWaitsInLostUntilClose(t *testing.T) {
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "gone", Addresses: []string{refusedAddr(t)}}},
		fleet.Option(func(c *fleet.Config) {
			// The retry delay outlasts the test: the agent stays lost.
			c.Dialer.MinRetryInterval, c.Dialer.MaxRetryInterval = time.Hour, time.Hour
		}))
	ch := tf.agentChange(t, "gone", transport.EventDialFailed, transport.StateConnecting, transport.StateLost)
	if ch.Message == "" {
		t.Error("a refused dial carries no cause")
	}
	if got := tf.closedFrom(t); got["gone"] != string(transport.StateLost) {
		t.Errorf("closed from %v, want lost", got)
	}
}

func TestAgentHangingUpBeforeItsHelloIsLost(t *testing.T) {
	addr := rawListener(t, func(nc net.Conn) { nc.Close() })
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "rude", Addresses: []string{addr}}})
	tf.agentChange(t, "rude", transport.EventTCPEstablished, transport.StateConnecting, transport.StateAuthenticating)
	ch := tf.agentChange(t, "rude", transport.EventHandshakeFailed, transport.StateAuthenticating, transport.StateLost)
	if ch.Message == "" {
		t.Error("a failed handshake carries no cause")
	}
}

// A fleet closed while one agent's hello is awaited and another agent was
// not dialled yet closes both connection machines.
func TestCloseWhileAuthenticatingAndBeforeTheFirstDial(t *testing.T) {
	silent := rawListener(t, func(net.Conn) {}) // accepts, never says hello
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg,
		[]fleet.Agent{{Name: "a", Addresses: []string{silent}}, {Name: "b", Addresses: []string{silent}}},
		fleet.Option(func(c *fleet.Config) {
			// The first target a scan finds is dialled at once, the second
			// an hour later.
			c.Dialer.ScanSpread = time.Hour
		}))
	tf.agentChange(t, "", transport.EventTCPEstablished, transport.StateConnecting, transport.StateAuthenticating)
	got := tf.closedFrom(t)
	states := []string{got["a"], got["b"]}
	slices.Sort(states)
	if want := []string{string(transport.StateAuthenticating), string(transport.StateConnecting)}; !slices.Equal(states, want) {
		t.Errorf("closed from %v, want one authenticating and one connecting", got)
	}
}

// A stop whose worker the agent no longer has (it died unseen) ends the
// instance as gone, not stopped by the stop.
func TestStopOfAWorkerTheAgentLostEndsItGone(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	peer.forget(inst.ID())
	if err := inst.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	tf.waitChange(t, "workerGone from stopping", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() &&
			c.Event == string(fleet.EventWorkerGone) && c.From == string(fleet.StateStopping)
	})
}

// A task_done that trails the reconnect snapshot (the run ended during
// the outage; the agent lists the worker settled, then its outbox sends
// the task_done) still opens the review: idle → awaiting_review.
func TestATaskDoneTrailingTheReconnectStartsTheReview(t *testing.T) {
	tf, peer, proxy := proxiedFleet(t)
	inst := spawn(t, tf, "box")
	peer.holdRuns()
	task, err := inst.Submit(t.Context(), "work", fleet.PromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tf.waitChange(t, "the run", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeEvent && c.InstanceID == inst.ID()
	})

	proxy.Refuse(true)
	proxy.Cut()
	tf.waitInstance(t, inst.ID(), fleet.StateUnreachable)
	peer.mu.Lock()
	delete(peer.held, inst.ID()) // the run ends during the outage
	peer.mu.Unlock()
	proxy.Refuse(false)
	tf.waitChange(t, "reconnected idle", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.Event == string(fleet.EventReconnectedIdle)
	})
	peer.send(peer.conn(), &transport.TaskDoneFrame{TaskID: task.ID(), InstanceID: inst.ID(), Seq: 1,
		Status: transport.TaskSettled, Summary: "done", LastAssistantMessage: "done"})
	tf.waitChange(t, "taskDone from idle", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() &&
			c.Event == string(fleet.EventTaskDone) && c.From == string(fleet.StateIdle)
	})
	if r := tf.report(t); r.TaskID != task.ID() {
		t.Errorf("report %+v, want task %s", r, task.ID())
	}
}
