//go:build unix

package fleet_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/dialer"
	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// BenchmarkServerScale measures one server (the fleet SDK) holding 1,000
// and 10,000 agents × 10 idle instances over loopback TCP: the memory it
// keeps, and the CPU its heartbeats cost. Run it once:
//
//	go test -run XXX -bench ServerScale -benchtime 5x -timeout 60m ./fleet
//
// The agents are test peers (testAgentPeer: a real TCP listener speaking
// the protocol, with the pifleet frames), not agent daemons: 10,000
// daemons with 100,000 shims and workers are far more processes than two
// cores hold. They run in child processes of their own (this test binary
// again, TestScalePeerHost, at most peersPerHost each), so that the
// figures are the server's alone and no process needs more file
// descriptors than the hard limit allows. Heartbeats go out every second
// here instead of every 15 s, from the server and from the peers, so that
// a short window sees many rounds; the CPU per round is what scales.
// PIFLEET_SCALE_PEER_BEAT=15s has the peers beat at the protocol's pace
// instead (as this benchmark did before: a round then held a fifteenth of
// the heartbeats the server receives in a real one).
//
// PIFLEET_SCALE_SERVER_BEAT=1h has the server send no heartbeats while
// it measures (the peers then keep their connections for an hour without
// hearing from it): what is left of a round is its receiving half.
// The peers announce tcp-liveness, as pifleet agents do on Linux: the
// server then sends them no heartbeats, and a round is its receiving
// half. PIFLEET_SCALE_V1=1 has them announce nothing (as TypeScript
// agents, or pifleet ones before tcp-liveness): the server beats them too,
// a whole round.
// PIFLEET_SCALE_INSTANCES=N spawns N instances per agent instead of 10
// (0 for heartbeat figures in a fraction of the time).
//
// The 5,000- and 10,000-agent sizes run only with PIFLEET_SCALE_BIG=1.
//
// PIFLEET_SCALE_HEAPPROFILE=FILE writes a heap profile once every
// instance runs; PIFLEET_SCALE_CPUPROFILE=FILE profiles the idle rounds.
func BenchmarkServerScale(b *testing.B) {
	raiseFileLimit(b)
	for _, agents := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			if agents > 1000 && os.Getenv("PIFLEET_SCALE_BIG") == "" {
				// Minutes each, and most of the machine: only on request.
				b.Skip("set PIFLEET_SCALE_BIG=1 to run it")
			}
			perAgent := 10
			if v := os.Getenv("PIFLEET_SCALE_INSTANCES"); v != "" {
				var err error
				if perAgent, err = strconv.Atoi(v); err != nil || perAgent < 0 {
					b.Fatalf("PIFLEET_SCALE_INSTANCES=%q: want a count", v)
				}
			}
			benchServerScale(b, agents, perAgent)
		})
	}
}

// raiseFileLimit lifts the soft limit on open files to the hard one (and
// the hard one too where the process may): the server holds a descriptor
// per agent, a peer host two per peer. The peer hosts inherit it.
func raiseFileLimit(tb testing.TB) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	const want = 1 << 16
	if lim.Max < want {
		up := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
			return
		}
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
}

// peersPerHost keeps each peer host under 10,000 descriptors (a listener
// and a connection per peer).
const peersPerHost = 4000

func benchServerScale(b *testing.B, agents, perAgent int) {
	const beat = time.Second
	// The tests' lock bookkeeping reads the goroutine's stack on every
	// lock: not what a server pays.
	defer fleet.SetLockCheck(fleet.SetLockCheck(false))
	peerBeat, serverBeat := envDuration(b, "PIFLEET_SCALE_PEER_BEAT", beat), envDuration(b, "PIFLEET_SCALE_SERVER_BEAT", beat)
	list := startPeerHosts(b, agents, peerBeat, serverBeat > beat)
	mem0, goroutines0 := memInUse(), runtime.NumGoroutine()
	start := time.Now()

	tf := startFleet(b, b.TempDir(), b.TempDir(), list, func(c *fleet.Config) {
		// The heartbeats are sped up on both sides, so that a round of
		// a second carries what a round of 15 s does: a heartbeat sent
		// and one received per agent. The expiry stays the protocol's
		// 45 s: a shorter one once expired connections whose beat was
		// late on a busy machine.
		c.Conn.HeartbeatInterval = serverBeat
		if os.Getenv("PIFLEET_SCALE_LOG") != "" {
			c.Logger = zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
		}
		if os.Getenv("PIFLEET_SCALE_DIAL") == "before" {
			// The dialing schedule before the fleet's own defaults,
			// for the connect rate's "before" figure.
			d := dialer.DefaultConfig()
			c.Dialer.ScanSpread, c.Dialer.PoolSize, c.Dialer.QueueSize = d.ScanSpread, d.PoolSize, d.QueueSize
		}
	})
	publish(b, tf.regRoot, "default", `{}`)
	tf.sub.Close() // nobody reads it here
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Minute)
	defer cancel()
	// Status copies every agent and instance: polled after every change,
	// as this loop once did, it costs O(agents²) while the agents connect
	// and starved the connections at 10,000. Once a second is enough.
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for polls := 1; ; polls++ {
		n := established(tf.Status(ctx))
		if n == agents {
			break
		}
		if polls%30 == 0 {
			// To standard error at once: a benchmark's log appears only
			// after its cleanups, and closing 10,000 agents takes long.
			fmt.Fprintf(os.Stderr, "%d of %d agents established after %d s\n", n, agents, polls)
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
			b.Fatalf("%d of %d agents established", established(tf.Status(ctx)), agents)
		}
	}
	connectRate := float64(agents) / time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "%d agents established in %.1f s (%.0f per second), peak RSS so far %.0f MiB\n",
		agents, time.Since(start).Seconds(), connectRate, float64(peakRSS())/(1<<20))
	memAgents := memInUse()
	memAgents.sub(mem0)
	goroutinesPerAgent := float64(runtime.NumGoroutine()-goroutines0) / float64(agents)
	spawnStart := time.Now()

	// Spawn every instance, a few at a time per agent.
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	sem := make(chan struct{}, 64)
	for _, a := range list {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			for range perAgent {
				if _, err := tf.Spawn(ctx, fleet.SpawnOptions{Agent: a.Name, Cwd: "/work/repo", Bundle: "default"}); err != nil {
					fmt.Fprintf(os.Stderr, "%s spawn on %s: %v\n", time.Now().Format(time.TimeOnly), a.Name, err)
					errs <- fmt.Errorf("spawn on %s: %w", a.Name, err)
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
	fmt.Fprintf(os.Stderr, "%d instances spawned in %.1f s\n", agents*perAgent, time.Since(spawnStart).Seconds())
	mem := memInUse()
	mem.sub(mem0)
	if p := os.Getenv("PIFLEET_SCALE_HEAPPROFILE"); p != "" {
		writeProfile(b, p, pprof.WriteHeapProfile)
	}
	heapInstances := mem.heap - memAgents.heap

	// Idle: only heartbeats flow. Measure the process's CPU over rounds.
	if p := os.Getenv("PIFLEET_SCALE_CPUPROFILE"); p != "" {
		writeProfile(b, p, func(w io.Writer) error {
			if err := pprof.StartCPUProfile(w); err != nil {
				return err
			}
			b.Cleanup(pprof.StopCPUProfile) // before the file closes: cleanups run last first
			return nil
		})
	}
	cpu0, wall0 := cpuTime(), time.Now()
	for b.Loop() {
		time.Sleep(beat) // one heartbeat round per iteration, by design
	}
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	rounds := wall.Seconds() / beat.Seconds()
	// At once, to standard error: the benchmark's own line comes only
	// after the cleanups, which take minutes at 10,000 agents.
	fmt.Fprintf(os.Stderr, "%d agents × %d: %.1f MiB heap + %.1f MiB stacks, peak RSS %.0f MiB, %.1f goroutines per agent, %.1f ms CPU per heartbeat round (%.2f µs per agent)\n",
		agents, perAgent, float64(mem.heap)/(1<<20), float64(mem.stack)/(1<<20), float64(peakRSS())/(1<<20),
		goroutinesPerAgent, float64(cpu.Microseconds())/1000/rounds, float64(cpu.Microseconds())/rounds/float64(agents))
	b.ReportMetric(float64(mem.heap+mem.stack)/(1<<20), "MiB")
	b.ReportMetric(float64(mem.heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(mem.stack)/(1<<20), "stack-MiB")
	b.ReportMetric(float64(memAgents.heap+memAgents.stack)/float64(agents), "B/agent")
	if perAgent > 0 { // PIFLEET_SCALE_INSTANCES=0: no instances to share the heap by
		b.ReportMetric(float64(heapInstances)/float64(agents*perAgent), "heap-B/instance")
	}
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
	b.ReportMetric(goroutinesPerAgent, "goroutines/agent")
	b.ReportMetric(float64(cpu.Microseconds())/1000/rounds, "cpu-ms/heartbeat-round")
	// Per agent and round: with tcp-liveness, what one heartbeat received
	// costs the server.
	b.ReportMetric(float64(cpu.Microseconds())/rounds/float64(agents), "cpu-us/agent-round")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
	b.ReportMetric(connectRate, "agents-connected/s")
}

// envDuration is the duration in the environment variable name, or def.
func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return d
}

// writeProfile creates path and has write fill it; the file closes when
// the benchmark ends.
func writeProfile(b *testing.B, path string, write func(io.Writer) error) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if err := write(f); err != nil {
		b.Fatal(err)
	}
}

// startPeerHosts starts enough peer hosts for n agents and returns the
// agents to dial. The hosts end with the benchmark.
func startPeerHosts(b *testing.B, n int, beat time.Duration, deaf bool) []fleet.Agent {
	b.Helper()
	var list []fleet.Agent
	for host := 0; len(list) < n; host++ {
		count := min(peersPerHost, n-len(list))
		cmd := exec.Command(os.Args[0], "-test.run=^TestScalePeerHost$", "-test.timeout=0")
		cmd.Env = append(os.Environ(), "PIFLEET_SCALE_PEERS="+strconv.Itoa(count),
			fmt.Sprintf("PIFLEET_SCALE_PREFIX=h%d", host), "PIFLEET_SCALE_BEAT="+beat.String())
		if deaf {
			cmd.Env = append(cmd.Env, "PIFLEET_SCALE_PEER_EXPIRY=1h")
		}
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			stdin.Close() // the host closes its peers and exits
			_ = cmd.Wait()
		})
		sc := bufio.NewScanner(stdout)
		ready := false
		for !ready && sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 3 && f[0] == "peer":
				list = append(list, fleet.Agent{Name: f[1], Addresses: []string{f[2]}})
			case len(f) == 1 && f[0] == "ready":
				ready = true
			}
		}
		if !ready {
			b.Fatalf("peer host %d ended before it was ready: %v", host, sc.Err())
		}
		go io.Copy(io.Discard, stdout) // the test framework's last lines
	}
	return list
}

// TestScalePeerHost is not a test of its own: BenchmarkServerScale runs
// the test binary with it to host PIFLEET_SCALE_PEERS agent peers in a
// process apart. It prints "peer MACHINE ADDR" per peer, then "ready",
// and serves until its standard input closes.
func TestScalePeerHost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PIFLEET_SCALE_PEERS"))
	if n <= 0 {
		t.Skip("run by BenchmarkServerScale only")
	}
	prefix := os.Getenv("PIFLEET_SCALE_PREFIX")
	every, _ := time.ParseDuration(os.Getenv("PIFLEET_SCALE_BEAT"))
	expiry, _ := time.ParseDuration(os.Getenv("PIFLEET_SCALE_PEER_EXPIRY")) // 0: the default
	// The peers beat as often as the server, from one goroutine as an
	// agent daemon does not (it has one connection): what is measured is
	// the server's side of a round, sending and receiving.
	beats := transport.NewHeartbeats()
	out := bufio.NewWriter(os.Stdout)
	peers := make([]*testAgentPeer, n)
	for i := range peers {
		peers[i] = newTestAgentPeer(t, fmt.Sprintf("%s-box-%05d", prefix, i), true, func(p *testAgentPeer) {
			p.beat = transport.Options{HeartbeatInterval: every, ExpiryTimeout: expiry, Heartbeats: beats}
			if os.Getenv("PIFLEET_SCALE_V1") == "" {
				p.caps = []string{transport.CapabilityTCPLiveness}
			}
		})
		fmt.Fprintf(out, "peer %s %s\n", peers[i].machine, peers[i].Addr())
	}
	fmt.Fprintln(out, "ready")
	if err := out.Flush(); err != nil {
		t.Fatal(err)
	}
	// Drain what the peers log while serving, so that no log fills up.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, os.Stdin)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return // the cleanups close the peers
		case <-tick.C:
			for _, p := range peers {
				drainFrames(p)
			}
		}
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

// goMem is the memory the Go runtime holds for live data: heap spans in
// use and goroutine stacks.
type goMem struct{ heap, stack int64 }

func (m *goMem) sub(o goMem) { m.heap -= o.heap; m.stack -= o.stack }

// memInUse is the live heap and the stacks after a collection.
func memInUse() goMem {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return goMem{heap: int64(m.HeapInuse), stack: int64(m.StackInuse)}
}

// peakRSS is the process's largest resident set so far, in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return ru.Maxrss // bytes there
	}
	return ru.Maxrss << 10 // KiB
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
