package dialer

import (
	"container/heap"
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// benchDirectory is a Directory without locks, for single-goroutine
// benchmarks: its cost is three map lookups per evaluation, like a real one.
type benchDirectory struct {
	order   []string
	entries map[string]*benchEntry
}

type benchEntry struct {
	addrs     []string
	connected bool
}

func newBenchDirectory(n int) *benchDirectory {
	d := &benchDirectory{entries: make(map[string]*benchEntry, n)}
	for i := range n {
		id := fmt.Sprintf("agent-%06d", i)
		d.order = append(d.order, id)
		d.entries[id] = &benchEntry{addrs: []string{fmt.Sprintf("100.%d.%d.%d:9788", i>>16, (i>>8)&255, i&255)}}
	}
	return d
}

func (d *benchDirectory) Targets() []string { return d.order }
func (d *benchDirectory) Eligible(id string) bool {
	_, ok := d.entries[id]
	return ok
}
func (d *benchDirectory) Addresses(id string) []string { return d.entries[id].addrs }
func (d *benchDirectory) Connected(id string) bool     { return d.entries[id].connected }

var benchSizes = []int{10_000, 100_000}

// BenchmarkEvent measures the engine's cost per event with n targets
// tracked: each iteration takes one target through a dispatch, a successful
// dial and a fast failure (three transitions, heap operations on an n-entry
// heap, directory lookups, counters, a disabled logger).
func BenchmarkEvent(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			dir := newBenchDirectory(n)
			var job *dialJob
			e := newEngine(DefaultConfig(), dir, testRand(), zerolog.Nop(), &counters{}, func(j *dialJob) { job = j })
			e.scan(0)
			recs := make([]*record, n)
			for i, id := range dir.order {
				recs[i] = e.records[id]
			}
			now := instant(0)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, cpuOK := cpuTime()
			for i := range b.N {
				r := recs[i%n]
				now += time.Microsecond
				e.evaluate(now, r)
				dir.entries[r.id].connected = true
				e.result(now, job, nil)
				dir.entries[r.id].connected = false
				e.disconnected(now, r.id)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(3*b.N), "ns/event")
			if cpu1, ok := cpuTime(); ok && cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(3*b.N), "cpu-ns/event")
			}
			if len(e.records) != n || len(e.due) != n {
				b.Fatalf("%d records, %d on the heap", len(e.records), len(e.due))
			}
		})
	}
}

// BenchmarkMemoryPerTarget measures the heap held per tracked target: the
// record, its map entry, its heap slot and its own sorted address list
// (one address). The directory's memory is not counted.
func BenchmarkMemoryPerTarget(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("targets=%d", n), func(b *testing.B) {
			dir := newBenchDirectory(n)
			var perTarget float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				e := newEngine(DefaultConfig(), dir, testRand(), zerolog.Nop(), &counters{}, func(*dialJob) {})
				e.scan(0)
				runtime.GC()
				runtime.ReadMemStats(&after)
				if len(e.records) != n {
					b.Fatalf("%d records", len(e.records))
				}
				perTarget = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				runtime.KeepAlive(e)
			}
			b.ReportMetric(perTarget, "B/target")
		})
	}
}

// BenchmarkLoopNotify measures a notification end to end: posted to the
// mailbox, taken by the running loop and handled (an address refresh of a
// tracked target). It runs in real time with a long DialDelay, so nothing
// is dialled.
func BenchmarkLoopNotify(b *testing.B) {
	const n = 10_000
	dir := newMemDirectory()
	for i := range n {
		dir.add(fmt.Sprintf("agent-%06d", i), "10.0.0.1:9788")
	}
	cfg := DefaultConfig()
	cfg.DialDelay = time.Hour
	d, err := New(cfg, dir, noDial)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	ids := dir.Targets()
	for _, id := range ids {
		d.Updated(id)
	}
	if _, err := d.Snapshot(ctx); err != nil { // all tracked
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.Updated(ids[i%n])
	}
	if _, err := d.Snapshot(ctx); err != nil { // all handled
		b.Fatal(err)
	}
	b.StopTimer()
	cancel()
	<-done
}

// BenchmarkReconnectStorm disconnects 100,000 connected targets at once and
// drives the engine with a scripted clock (every dial takes 50 ms and
// succeeds) until all are connected again and untracked. It reports the
// virtual time that took, the peak of dials in flight, the most dial starts
// in any one second, and the cost per event (wall clock and CPU time).
func BenchmarkReconnectStorm(b *testing.B) {
	const n = 100_000
	const latency = 50 * time.Millisecond
	cfg := DefaultConfig()
	for range b.N {
		dir := newBenchDirectory(n)
		var pending completions
		var now instant
		var peak, running int
		e := newEngine(cfg, dir, testRand(), zerolog.Nop(), &counters{}, nil)
		starts := map[instant]int{} // dial starts per virtual second
		e.start = func(j *dialJob) {
			running++
			peak = max(peak, running)
			starts[now/time.Second*time.Second]++
			heap.Push(&pending, completion{at: now + latency, job: j})
		}
		for _, id := range dir.order {
			e.disconnected(now, id) // all at once
		}
		events := uint64(n)
		t0 := time.Now()
		cpu0, cpuOK := cpuTime()
		for len(e.records) > 0 {
			next, ok := e.nextDue()
			if len(pending) > 0 && (!ok || pending[0].at < next) {
				next = pending[0].at
			}
			now = next
			for len(pending) > 0 && pending[0].at <= now {
				c := heap.Pop(&pending).(completion)
				running--
				dir.entries[c.job.id].connected = true
				e.result(now, c.job, nil)
				events++
			}
			e.runDue(now, allDue)
		}
		wall := time.Since(t0)
		cpu1, _ := cpuTime()
		s := e.stats.load()
		events += s.PoolFull + s.DialsStarted + s.Removals
		busiest := 0
		for _, c := range starts {
			busiest = max(busiest, c)
		}
		if peak > cfg.PoolSize {
			b.Fatalf("%d dials in flight, pool is %d", peak, cfg.PoolSize)
		}
		b.ReportMetric(now.Seconds(), "virtual-s")
		b.ReportMetric(float64(peak), "peak-in-flight")
		b.ReportMetric(float64(busiest), "max-starts/s")
		b.ReportMetric(float64(s.PoolFull)/n, "poolFull/target")
		b.ReportMetric(float64(wall.Nanoseconds())/float64(events), "ns/event")
		if cpuOK {
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(events), "cpu-ns/event")
		}
	}
}

type completion struct {
	at  instant
	job *dialJob
}

type completions []completion

func (c completions) Len() int           { return len(c) }
func (c completions) Less(i, j int) bool { return c[i].at < c[j].at }
func (c completions) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)        { *c = append(*c, x.(completion)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}
