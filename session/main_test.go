package session

import (
	"fmt"
	"go.uber.org/goleak"
	"os"
	"testing"

	"example.com/pifleet/internal/fsmkit/fsmtest"
)

// TestMain checks, once the package's tests ran, that the projection
// drove every edge of RegistryTable and dropped no event silently.
func TestMain(m *testing.M) {
	trace := fsmtest.StartTrace(fsmtest.Checks{
		Cover: []fsmtest.Coverage{fsmtest.Cover(RegistryTable)},
		Provoked: []fsmtest.Late{
			{Machine: "session-registry", Event: "reattach", State: "stale_projection",
				Reason: "TestCatchUp: a catch-up before the full report is refused"},
			{Machine: "session-registry", Event: "caughtUp", State: "synced",
				Reason: "TestCatchUp: a second CaughtUp is refused"},
		},
	})
	code := trace.Check(m.Run())
	if err := goleak.Find(); code == 0 && err != nil {
		fmt.Fprintf(os.Stderr, "goroutines outlived the tests: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
