//go:build unix

package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"example.com/pifleet/fleet/agent/internal/worker"
)

// A daemon starts a worker under a shim, forwards a prompt, reads the
// events up to the settle, and stops it. (The test binary plays both the
// agent's `shim` subcommand and a toy worker here; the daemon passes pi's
// command line.)
func Example() {
	stateDir, _ := os.MkdirTemp("", "wk")
	defer os.RemoveAll(stateDir)
	ctx := context.Background()

	w, err := worker.Start(ctx, worker.Spec{
		InstanceID:  "i-0123456789ab",
		Command:     []string{os.Args[0], "toy"},
		StateDir:    stateDir,
		ShimCommand: []string{os.Args[0], "shim"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("session:", w.Snapshot().SessionPath)
	w.Send(json.RawMessage(`{"id":"p1","type":"prompt","message":"hi"}`))
	for ev := range w.Events() {
		fmt.Println(ev.Kind)
		if ev.Settled != nil {
			fmt.Printf("settled: %q\n", ev.Settled.LastAssistantText)
			break
		}
	}
	go func() {
		for range w.Events() { // keep reading: the exit comes this way
		}
	}()
	forced, err := w.Stop(ctx)
	fmt.Println("forced:", forced, err, w.Snapshot().State)
	<-w.Done() // the shim is gone too
	// Output:
	// session: /tmp/toy-session.jsonl
	// response
	// agent_start
	// message_end
	// agent_end
	// agent_settled
	// settled: "echo: hi"
	// forced: false <nil> stopped
}
