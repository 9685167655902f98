package fleet_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/internal/shim"
)

// TestMain fails the package's tests when any goroutine outlives them:
// every fleet and test peer is closed by its test, and Close must leave
// nothing running. The test binary also plays the agent's shim (as
// `pifleet-agent shim` does) for the end-to-end tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(shim.Main(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}
