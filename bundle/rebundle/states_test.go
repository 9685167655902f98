package rebundle

import (
	"testing"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestTableMatrix(t *testing.T) {
	// Written from seed §10 and the documented addition, not from the table.
	fsmtest.Matrix(t, Table, map[State]map[Event]State{
		StateRunningOld: {EventUse: StateSyncing},
		StateSyncing:    {EventSynced: StateReloading, EventSyncFailed: StateUnchanged},
		StateReloading:  {EventReloaded: StateRunningNew, EventReloadFailed: StateUnchanged},
		StateUnchanged:  {EventKept: StateRunningOld},
		StateRunningNew: {},
	})
}

func TestTableReachable(t *testing.T) {
	fsmtest.Reachable(t, Table)
}

func TestTableMatchesSeed(t *testing.T) {
	seed := fsmtest.SeedEdges(t, "../../docs/seeds/state-flow.md", "## 10. Runtime rebundle")
	fsmtest.MatchSeed(t, Table, seed, []fsmkit.Edge{
		// A restart with B that fails leaves the worker on A.
		fsmtest.Edge("reloading", "unchanged", "reloadFailed"),
	})
}

func TestTableGolden(t *testing.T) {
	fsmtest.Golden(t, Table, "testdata/rebundle.mmd")
}
