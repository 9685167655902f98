package serverstore_test

import (
	"fmt"
	"os"

	"example.com/pifleet/fleet/internal/serverstore"
)

// Example shows the task_done delivery protocol: replay what a previous
// run left pending, then record each report, ack it, notify the
// application and mark it notified; a replay of the same report is only
// acked.
func Example() {
	dir, _ := os.MkdirTemp("", "serverstore-example")
	defer os.RemoveAll(dir)
	st, err := serverstore.Open(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()

	notify := func(td serverstore.TaskDone) { fmt.Println("application told:", td.TaskID, td.Summary) }
	ack := func(key serverstore.DedupeKey) { fmt.Println("ack", key) }

	// At start, before any agent connection.
	pending, _ := st.PendingNotifications()
	for _, d := range pending {
		notify(*d.TaskDone)
		st.MarkNotified(d.Key)
	}

	// On each task_done frame (the second is the agent's replay).
	td := serverstore.TaskDone{TaskID: "t-1", InstanceID: "i-1", Seq: 1760000000000, Status: "settled", Summary: "tests pass"}
	for range 2 {
		rc, err := st.RecordTaskDone(td, nil)
		if err != nil {
			fmt.Println("not acked:", err)
			continue
		}
		ack(rc.Key)
		if rc.Duplicate {
			continue
		}
		notify(td)
		if err := st.MarkNotified(rc.Key); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// ack i-1:t-1:1760000000000
	// application told: t-1 tests pass
	// ack i-1:t-1:1760000000000
}
