package agentstore_test

import (
	"fmt"
	"os"

	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/transport"
)

// The outbox life of one task_done: persisted before the send, replayed
// until acknowledged, gone after the ack — across a restart in between.
func Example() {
	dir, err := os.MkdirTemp("", "agentstore-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	store, err := agentstore.Open(dir)
	if err != nil {
		panic(err)
	}
	entry, err := store.Put(&transport.TaskDoneFrame{
		InstanceID: "i-1", TaskID: "t-42", Status: transport.TaskSettled, Summary: "tests pass",
	}, "conn-1")
	if err != nil {
		panic(err)
	}
	// … send entry.Frame, then record the attempt:
	if err := store.MarkSent(entry.Seq); err != nil {
		panic(err)
	}
	store.Close() // the agent restarts before the ack arrives

	store, err = agentstore.Open(dir)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	pending, _ := store.Pending()
	fmt.Println("replay:", len(pending), pending[0].Frame.TaskID, pending[0].Seq == entry.Seq, pending[0].Attempts)

	removed, _ := store.Ack("t-42", entry.Seq.Float())
	again, _ := store.Ack("t-42", entry.Seq.Float())
	pending, _ = store.Pending()
	fmt.Println("ack:", removed, again, len(pending))
	// Output:
	// replay: 1 t-42 true 1
	// ack: true false 0
}
