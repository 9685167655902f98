package fleet

import (
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
)

// A lost connection makes its own agent's idle instances unreachable, and
// no other agent's.
func TestConnectionLossTouchesOnlyItsAgentsInstances(t *testing.T) {
	f, peers := pipedFleet(t, 3, 2)
	sub := f.Subscribe(64)
	_ = peers[1].Close()
	for c := range sub.C {
		if c.Kind == ChangeAgentState && c.To == string(transport.StateLost) {
			if c.Agent != "box-00001" {
				t.Fatalf("%s lost, want box-00001", c.Agent)
			}
			break
		}
	}
	sub.Close()
	f.mu.Lock()
	for _, inst := range f.core.allInstances() {
		want := StateIdle
		if inst.agent == "box-00001" {
			want = StateUnreachable
		}
		if st := inst.m.State(); st != want {
			t.Errorf("instance %s of %s is %s, want %s", inst.id, inst.agent, st, want)
		}
	}
	if n := len(slices.Collect(f.core.agentInstances("box-00001"))); n != 2 {
		t.Errorf("box-00001 indexes %d instances, want 2", n)
	}
	f.mu.Unlock()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// An instance id registered again under another agent (ids are the
// agents' own) leaves the index of the agent it had: a loss of that agent
// must not touch the instance that replaced it.
func TestInstanceRegisteredAgainMovesInTheIndex(t *testing.T) {
	f, _ := pipedFleet(t, 0, 0)
	defer f.Close()
	m, err := InstanceTable.Restore(StateIdle)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addInstanceLocked(newInstance(f, "i-1", "a", serverstore.Instance{InstanceID: "i-1", Machine: "a"}, m))
	f.addInstanceLocked(newInstance(f, "i-1", "b", serverstore.Instance{InstanceID: "i-1", Machine: "b"}, m))
	a, b := slices.Collect(f.core.agentInstances("a")), slices.Collect(f.core.agentInstances("b"))
	if len(a) != 0 || len(b) != 1 || b[0] != f.core.instance("i-1") || b[0].agent != "b" {
		t.Fatalf("index after re-registering i-1 under b: a %v, b %v", a, b)
	}
}

// BenchmarkConnectionLoss measures the server's work when every agent's
// connection drops at once (a network partition), and then Close: agents
// × 10 idle instances, connected over in-memory pipes (real transport
// connections, without TCP and handshakes, so that 10,000 agents set up
// in seconds). "ms/drop" is the time from closing every agent's end until
// every agent is lost and every instance unreachable; "ms/close" is the
// fleet's Close after that. Run it once:
//
//	go test -run XXX -bench ConnectionLoss -benchtime 1x ./fleet
func BenchmarkConnectionLoss(b *testing.B) {
	for _, agents := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) { benchConnectionLoss(b, agents, 10) })
	}
}

func benchConnectionLoss(b *testing.B, agents, perAgent int) {
	var drop, closing time.Duration
	for range b.N {
		b.StopTimer()
		f, peers := pipedFleet(b, agents, perAgent)
		// Each agent's loss publishes its own change and one per instance.
		sub := f.Subscribe(agents * (perAgent + 1))
		b.StartTimer()
		t0 := time.Now()
		for _, p := range peers {
			_ = p.Close()
		}
		for lost := 0; lost < agents; {
			c := <-sub.C
			if c.Kind == ChangeAgentState && c.To == string(transport.StateLost) {
				lost++
			}
		}
		drop += time.Since(t0)
		sub.Close()
		t1 := time.Now()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		closing += time.Since(t1)
		b.StopTimer()
		f.mu.Lock()
		for _, inst := range f.core.allInstances() {
			if st := inst.m.State(); st != StateUnreachable {
				b.Fatalf("instance %s is %s after its connection dropped", inst.id, st)
			}
		}
		f.mu.Unlock()
	}
	b.ReportMetric(float64(drop.Milliseconds())/float64(b.N), "ms/drop")
	b.ReportMetric(float64(closing.Milliseconds())/float64(b.N), "ms/close")
}

// pipedFleet starts a fleet with agents established over net.Pipe
// connections, perAgent idle instances each, and returns the agents'
// ends of the pipes (drained, so that the server's writes never block).
func pipedFleet(b testing.TB, agents, perAgent int) (*Fleet, []net.Conn) {
	f, err := New(WithStateDir(b.TempDir()), WithLogger(zerolog.Nop()))
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	peers := make([]net.Conn, 0, agents)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range agents {
		name := fmt.Sprintf("box-%05d", i)
		a := newAgentState(name, nil, sourceInbound)
		f.setDirLocked(func() { f.agents[name] = a })
		f.fireConnLocked(a, transport.EventTCPEstablished, nil)
		f.fireConnLocked(a, transport.EventAllowed, nil)
		srv, peer := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, peer) }()
		peers = append(peers, peer)
		c := transport.NewConn(srv, f.connOptions(name))
		f.setDirLocked(func() { a.conn = c })
		for j := range perAgent {
			id := fmt.Sprintf("i-%05d-%02d", i, j)
			m, err := InstanceTable.Restore(StateIdle)
			if err != nil {
				b.Fatal(err)
			}
			f.addInstanceLocked(newInstance(f, id, name, serverstore.Instance{InstanceID: id, Machine: name, State: string(StateIdle)}, m))
		}
		f.wg.Add(1)
		f.watchLoss(a, c)
	}
	return f, peers
}

// The dialer's questions and WaitAgent are answered while another
// goroutine holds the fleet lock (a long hold must not stall the dialer).
func TestTheDirectoryDoesNotWaitForTheFleetLock(t *testing.T) {
	f, _ := pipedFleet(t, 1, 0)
	defer f.Close()
	d := directory{f}
	whileLockHeld(t, f, f.mu.Lock, "the dialer's directory", func() error {
		if got := d.Connected("box-00000"); !got {
			return fmt.Errorf("Connected = false for an established agent")
		}
		if !d.Eligible("box-00000") || d.Addresses("box-00000") != nil || len(d.Targets()) != 0 {
			return fmt.Errorf("directory: eligible %v, addresses %v, targets %v", d.Eligible("box-00000"), d.Addresses("box-00000"), d.Targets())
		}
		return f.WaitAgent(t.Context(), "box-00000")
	})
}
