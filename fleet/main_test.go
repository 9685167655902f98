package fleet_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/examples/scriptedworker/scripted"
	"example.com/pifleet/internal/shim"
)

// TestMain fails the package's tests when any goroutine outlives them:
// every fleet and test peer is closed by its test, and Close must leave
// nothing running. The test binary also plays the agent's shim (as
// `pifleet-agent shim` does) for the end-to-end tests, and the scripted
// worker for Example.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "shim":
			os.Exit(shim.Main(os.Args[2:]))
		case "worker": // the scripted pi-compatible worker of Example
			os.Exit(scripted.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		}
	}
	goleak.VerifyTestMain(m)
}
