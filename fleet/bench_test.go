package fleet_test

import (
	"testing"

	"example.com/pifleet/fleet"
)

// BenchmarkPromptRoundTrip measures Prompt → agent_settled through the
// SDK, a loopback TCP connection and the scripted test peer (which
// answers at once): the fleet's own overhead per prompt, four frames
// back per prompt, TCP_NODELAY on both ends.
func BenchmarkPromptRoundTrip(b *testing.B) {
	defer fleet.SetLockCheck(fleet.SetLockCheck(false)) // the tests' lock check reads the stack at every Lock
	peer := newTestAgentPeer(b, "box", true)
	tf := newTestFleet(b, peer)
	inst := spawn(b, tf, "box")
	tf.sub.Close()     // the benchmark reads no changes
	drainPeer(b, peer) // the peer logs every frame; keep its log from filling
	b.ReportAllocs()
	for b.Loop() {
		if _, err := inst.Prompt(b.Context(), "go", fleet.PromptOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventsDelivered measures worker events delivered to a
// prompt's OnEvent callback per second: each prompt's answer is streamed
// as 1,000 message_update events.
func BenchmarkEventsDelivered(b *testing.B) {
	defer fleet.SetLockCheck(fleet.SetLockCheck(false)) // the tests' lock check reads the stack at every Lock
	peer := newTestAgentPeer(b, "box", true)
	tf := newTestFleet(b, peer)
	inst := spawn(b, tf, "box")
	tf.sub.Close()
	drainPeer(b, peer)
	peer.mu.Lock()
	peer.updates = 1000
	peer.mu.Unlock()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := inst.Prompt(b.Context(), "go", fleet.PromptOptions{OnEvent: func(fleet.Event) { n++ }}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// drainPeer keeps the peer's frame log from filling during a benchmark.
func drainPeer(b *testing.B, peer *testAgentPeer) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-peer.frames:
			case <-stop:
				return
			}
		}
	}()
	b.Cleanup(func() { close(stop); <-done })
}
