//go:build unix

package agent

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"example.com/pifleet/transport"
)

// heapInuse is the agent process's live heap after a full collection.
func heapInuse() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse)
}

// BenchmarkAgentMemory reports the agent's heap when idle (listening, one
// server connected) and the extra heap per supervised worker (the worker
// and its shim are other processes and are not counted).
func BenchmarkAgentMemory(b *testing.B) {
	const workers = 8
	for range b.N {
		before := heapInuse()
		h := newHarness(b, hopts{})
		c := h.dial(b)
		c.hello()
		idle := heapInuse() - before
		for i := range workers {
			c.mustSpawn("s"+strconv.Itoa(i), h.cwd, "default", nil)
		}
		per := (heapInuse() - before - idle) / workers
		b.ReportMetric(idle/1024, "idle-KiB")
		b.ReportMetric(per/1024, "KiB/worker")
		h.shutdown()
	}
}

// BenchmarkRPCRoundTrip measures rpc → worker → event back through the
// agent over loopback TCP (a get_state and its response).
func BenchmarkRPCRoundTrip(b *testing.B) {
	h := newHarness(b, hopts{})
	c := h.dial(b)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	b.ResetTimer()
	for i := range b.N {
		id := "r" + strconv.Itoa(i)
		c.rpc(inst.InstanceID, "", map[string]any{"type": "get_state", "id": id})
		c.nextEvent(inst.InstanceID, func(e event) bool { return e.ID == id })
		c.seen = c.seen[:0]
	}
}

// BenchmarkEventThroughput streams a long reply one character per
// message_update and reports the events per second the client receives.
func BenchmarkEventThroughput(b *testing.B) {
	h := newHarness(b, hopts{env: []string{"PIFLEET_FAUX_CHUNK=1"}})
	c := h.dial(b)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", nil)
	text := strings.Repeat("x", 1000)
	b.ResetTimer()
	events := 0
	for i := range b.N {
		c.rpc(inst.InstanceID, "", prompt("p"+strconv.Itoa(i), "say: "+text))
		for {
			f := nextOf[*transport.EventFrame](c, func(f *transport.EventFrame) bool { return f.InstanceID == inst.InstanceID })
			events++
			if strings.Contains(string(f.Event[:min(40, len(f.Event))]), `"agent_settled"`) {
				break
			}
		}
		c.seen = c.seen[:0]
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}
