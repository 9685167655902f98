package e2ekit_test

import (
	"context"
	"fmt"
	"os"

	"example.com/pifleet/internal/e2ekit"
)

// Sweep reports, and ends, what an agent left running in its state
// directory; here nothing ran.
func ExampleSweep() {
	stateDir, err := os.MkdirTemp("", "agent-state")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(stateDir)
	left, err := e2ekit.Sweep(context.Background(), stateDir)
	fmt.Println(len(left), err)
	// Output: 0 <nil>
}
