package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"

	"example.com/pifleet/fleet/catalog"
)

// The catalogue describes its tools for a model and checks a call's
// arguments before anything reaches the fleet (here there is none).
func Example() {
	c := catalog.New(nil)
	for _, t := range c.List()[:3] {
		fmt.Println(t.Name, "-", t.Title)
	}
	_, err := c.Call(context.Background(), "remote_prompt", json.RawMessage(`{"text":"make the tests pass"}`), nil)
	fmt.Println(err)
	// Output:
	// fleet_status - Fleet status
	// fleet_tasks - Tasks
	// fleet_sessions - Sessions
	// bad_request: instanceId is required (The worker instance's id (i-…), as remote_spawn returned it or fleet_status lists it.)
}
