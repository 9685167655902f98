package fleet_test

import (
	"fmt"

	"example.com/pifleet/fleet"
)

// The fleet hands each task_done to the callback at least once: after a
// crash of the server it can hand a report out again, with the same Key.
// An application that must act once per report stores the key in the
// same transaction as the report's effect and skips a key it has stored.
// Here a map stands in for the application's database.
func ExampleWithTaskDone() {
	merged := map[fleet.TaskKey]string{} // the application's table: key → effect
	onTaskDone := func(r fleet.TaskReport) {
		if _, seen := merged[r.Key]; seen {
			return // told again after a restart: the effect is done already
		}
		merged[r.Key] = r.Summary // one transaction: the effect and its key
		fmt.Printf("task %s (%s): %s\n", r.TaskID, r.Key, r.Summary)
	}
	_ = fleet.WithTaskDone(onTaskDone) // passed to fleet.New

	report := fleet.TaskReport{
		Key:    fleet.TaskKey{InstanceID: "i-7", TaskID: "t-1", Seq: 1764547200000},
		TaskID: "t-1", InstanceID: "i-7", Seq: 1764547200000, Status: "settled", Summary: "the tests pass",
	}
	onTaskDone(report)
	onTaskDone(report) // the same report, handed out again after a crash
	// Output: task t-1 (i-7:t-1:1764547200000): the tests pass
}
