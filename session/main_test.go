package session

import (
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
	os.Exit(trace.Check(m.Run()))
}
