package session

import (
	"testing"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestRegistryTableMatrix(t *testing.T) {
	// Written from seed §9 and the documented additions, not from the table.
	fsmtest.Matrix(t, RegistryTable, map[RegistryState]map[RegistryEvent]RegistryState{
		StateStaleProjection: {
			EventReportReceived: StateReconciling,
		},
		StateReconciling: {
			EventPageReceived:   StateReconciling,
			EventReconciled:     StateSynced,
			EventReportRejected: StateStaleProjection,
			EventConnectionLost: StateStaleProjection,
		},
		StateSynced: {
			EventIncrementalReport: StateSynced,
			EventReattach:          StateCatchUp,
			EventConnectionLost:    StateStaleProjection,
		},
		StateCatchUp: {
			EventCaughtUp:          StateSynced,
			EventIncrementalReport: StateCatchUp,
			EventConnectionLost:    StateStaleProjection,
		},
	})
}

func TestRegistryTableReachable(t *testing.T) {
	fsmtest.Reachable(t, RegistryTable)
}

func TestRegistryTableMatchesSeed(t *testing.T) {
	seed := fsmtest.SeedEdges(t, "../docs/seeds/state-flow.md", "## 9. Session registry reconciliation")
	fsmtest.MatchSeed(t, RegistryTable, seed, []fsmkit.Edge{
		// A full report too large for one frame arrives in pages.
		fsmtest.Edge("reconciling", "reconciling", "pageReceived"),
		// An inconsistent full report (duplicate paths, pages out of order)
		// is not applied; the projection stays untrusted.
		fsmtest.Edge("reconciling", "stale_projection", "reportRejected"),
		// The connection can end at any time, not only when synced.
		fsmtest.Edge("reconciling", "stale_projection", "connectionLost"),
		fsmtest.Edge("catch_up", "stale_projection", "connectionLost"),
		// Incremental reports keep flowing while one session catches up.
		fsmtest.Edge("catch_up", "catch_up", "incrementalReport"),
	})
}

func TestRegistryTableGolden(t *testing.T) {
	fsmtest.Golden(t, RegistryTable, "testdata/session-registry.mmd")
}
