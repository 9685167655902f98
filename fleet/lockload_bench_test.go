package fleet_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// BenchmarkSDKLatencyUnderTaskDoneLoad measures how long an unrelated SDK
// call takes while 20 agents send 100 task_done/s between them (5 each,
// every one a new, fsync'd record), against the same fleet idle:
// Status (the fleet's view, under its lock) and Spawn (on a 21st agent,
// a round trip and the new instance's record). It reports the p50 and
// p99 latency of each, and the p99 and longest hold of the fleet lock
// (by anyone) while each ran: unlike the latencies, the holds do not
// grow with the machine's load, unless something waits for the disk
// under the lock.
//
//	go test ./fleet -run '^$' -bench SDKLatencyUnderTaskDoneLoad -benchtime 3s
func BenchmarkSDKLatencyUnderTaskDoneLoad(b *testing.B) {
	defer fleet.SetLockCheck(fleet.SetLockCheck(false)) // it reads the stack at every Lock
	for _, load := range []bool{false, true} {
		name := "idle"
		if load {
			name = "100_task_done_per_s"
		}
		b.Run(name, func(b *testing.B) {
			const agents, perSecond = 20, 5
			var peers []*testAgentPeer
			for i := range agents + 1 {
				peers = append(peers, newTestAgentPeer(b, fmt.Sprintf("m%02d", i), true))
			}
			// The application hears every report, until the fleet is
			// closed (its notifier waits for the callback).
			stopReports := make(chan struct{})
			reportsDone := make(chan struct{})
			b.Cleanup(func() { close(stopReports); <-reportsDone })
			tf := newTestFleet(b, peers...)
			go func() {
				defer close(reportsDone)
				for {
					select {
					case <-tf.reports:
					case <-stopReports:
						return
					}
				}
			}()
			var insts []*fleet.Instance
			for _, p := range peers[:agents] {
				insts = append(insts, spawn(b, tf, p.machine))
			}
			tf.sub.Close()
			for _, p := range peers {
				drainPeer(b, p)
			}
			ctx, cancel := context.WithCancel(b.Context())
			var wg sync.WaitGroup
			if load {
				for i, p := range peers[:agents] {
					wg.Go(func() {
						tick := time.NewTicker(time.Second / perSecond)
						defer tick.Stop()
						for seq := 1; ; seq++ {
							select {
							case <-tick.C:
							case <-ctx.Done():
								return
							}
							p.send(p.conn(), &transport.TaskDoneFrame{TaskID: fmt.Sprintf("t-load-%d-%d", i, seq),
								InstanceID: insts[i].ID(), Seq: float64(seq), Status: transport.TaskSettled, Summary: "done"})
						}
					})
				}
			}
			defer func() { cancel(); wg.Wait() }()
			fleet.SetLockTiming(true)
			defer fleet.SetLockTiming(false)
			b.Run("Status", func(b *testing.B) {
				var lat []time.Duration
				tf.LockHolds()
				for b.Loop() {
					start := time.Now()
					tf.Status(b.Context())
					lat = append(lat, time.Since(start))
				}
				reportPercentiles(b, "", lat)
				reportLockHolds(b, tf.LockHolds())
			})
			b.Run("Spawn", func(b *testing.B) {
				var lat []time.Duration
				tf.LockHolds()
				for b.Loop() {
					start := time.Now()
					spawn(b, tf, peers[agents].machine)
					lat = append(lat, time.Since(start))
				}
				reportPercentiles(b, "", lat)
				reportLockHolds(b, tf.LockHolds())
			})
		})
	}
}

// reportLockHolds reports the p99 and the longest of holds.
func reportLockHolds(b *testing.B, holds []time.Duration) {
	if len(holds) == 0 {
		return
	}
	slices.Sort(holds)
	b.ReportMetric(float64(holds[len(holds)*99/100].Nanoseconds()), "lock-p99-ns")
	b.ReportMetric(float64(holds[len(holds)-1].Nanoseconds()), "lock-max-ns")
}
