//go:build unix

package fleet_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// BenchmarkServerScale measures one server (the fleet SDK) holding 1,000
// agents × 10 idle instances over loopback TCP: the heap it keeps, and the
// CPU its heartbeats cost. Run it once:
//
//	go test -run XXX -bench ServerScale -benchtime 1x ./fleet
//
// The agents are in-process test peers (testAgentPeer: a real TCP
// connection speaking protocol v1), not agent daemons: 1,000 daemons
// with 10,000 shims and 10,000 workers are about 21,000 processes, more
// than two cores and 24 GiB hold. The peers share the process, so the
// heap and CPU figures include their side of each connection (an upper
// bound for the server alone). Heartbeats go out every second here
// instead of every 15 s, so that a short window sees many rounds; the
// CPU per round is what scales.
func BenchmarkServerScale(b *testing.B) {
	const agents, perAgent = 1000, 10
	const beat = time.Second
	peers := make([]*testAgentPeer, agents)
	for i := range peers {
		peers[i] = newTestAgentPeer(b, fmt.Sprintf("box-%04d", i), true)
	}
	heap0 := heapInUse()

	var list []fleet.Agent
	for _, p := range peers {
		list = append(list, fleet.Agent{Name: p.machine, Addresses: []string{p.Addr()}})
	}
	tf := startFleet(b, b.TempDir(), b.TempDir(), list, func(c *fleet.Config) {
		c.Conn.HeartbeatInterval = beat
		c.Conn.ExpiryTimeout = 30 * beat
	})
	publish(b, tf.regRoot, "default", `{}`)
	tf.sub.Close() // too small for 1,000 agents' changes
	sub := tf.Subscribe(1 << 17)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	for established(tf.Status(ctx)) < agents {
		select {
		case <-sub.C:
		case <-ctx.Done():
			b.Fatalf("%d of %d agents established", established(tf.Status(ctx)), agents)
		}
	}
	heapAgents := heapInUse() - heap0

	// Spawn every instance, a few at a time per agent.
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	sem := make(chan struct{}, 64)
	for _, p := range peers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for range perAgent {
				if _, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: p.machine, Cwd: "/work/repo", Bundle: "default"}); err != nil {
					errs <- fmt.Errorf("spawn on %s: %w", p.machine, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if n := len(tf.Status(ctx).Instances); n != agents*perAgent {
		b.Fatalf("%d instances, want %d", n, agents*perAgent)
	}
	heap := heapInUse() - heap0
	heapInstances := heap - heapAgents

	// Idle: only heartbeats flow. Measure the process's CPU over rounds.
	cpu0, wall0 := cpuTime(), time.Now()
	for b.Loop() {
		time.Sleep(beat) // one heartbeat round per iteration, by design
	}
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	rounds := wall.Seconds() / beat.Seconds()
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(heapAgents)/agents, "heap-B/agent")
	b.ReportMetric(float64(heapInstances)/(agents*perAgent), "heap-B/instance")
	b.ReportMetric(float64(cpu.Microseconds())/1000/rounds, "cpu-ms/heartbeat-round")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
	b.StopTimer()
	for _, p := range peers {
		drainFrames(p)
	}
}

func established(s fleet.Status) int {
	n := 0
	for _, a := range s.Agents {
		if a.State == transport.StateEstablished {
			n++
		}
	}
	return n
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
