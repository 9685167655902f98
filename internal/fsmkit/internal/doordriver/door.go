// Package doordriver is a tiny driver of a tiny table, for the tests of fsmkit's
// trace: its Fire calls are a driver's (they are not in a _test.go file),
// which is what the trace records.
package doordriver

import "example.com/pifleet/internal/fsmkit"

// Table is a door that opens, closes, and is knocked at while closed.
var Table = fsmkit.MustTable(fsmkit.Spec[string, string]{
	Name:    "door",
	Initial: "closed",
	Transitions: []fsmkit.Transition[string, string]{
		{Event: "open", Src: []string{"closed"}, Dst: "opened"},
		{Event: "close", Src: []string{"opened"}, Dst: "closed"},
		{Event: "knock", Src: []string{"closed"}, Dst: "closed"},
	},
})

// Drive fires events in order on a fresh door and returns the errors.
func Drive(events ...string) []error {
	m := Table.Start()
	var errs []error
	for _, ev := range events {
		if err := m.Fire(ev); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
