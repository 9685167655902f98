package cache

import (
	"testing"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestSyncTableMatrix(t *testing.T) {
	// Written from seed §3 and the documented additions, not from the table.
	fsmtest.Matrix(t, SyncTable, map[SyncState]map[SyncEvent]SyncState{
		StateFetchManifest: {
			EventManifestOK:          StateCacheCheck,
			EventRegistryDownCached:  StateUseStaleCache,
			EventRegistryDownNoCache: StateFailFast,
			EventManifestRejected:    StateReject,
			EventPinMismatch:         StateReject,
			EventFailed:              StateFailFast,
		},
		StateCacheCheck: {
			EventCacheHit:  StateReady,
			EventCacheMiss: StateDiffing,
			EventFailed:    StateFailFast,
		},
		StateDiffing:    {EventDiffed: StateFetching, EventFailed: StateFailFast},
		StateFetching:   {EventFilesStaged: StateValidating, EventFailed: StateFailFast},
		StateValidating: {EventTreeRejected: StateReject, EventVerified: StateSwapping, EventFailed: StateFailFast},
		StateSwapping:   {EventSwapped: StateReady, EventFailed: StateFailFast},
		StateUseStaleCache: {
			EventStaleCacheUsed: StateReadyDegraded,
			EventPinMismatch:    StateReject,
		},
		StateReject:        {EventRejected: StateFailFast},
		StateReady:         {},
		StateReadyDegraded: {},
		StateFailFast:      {},
	})
}

func TestSyncTableReachable(t *testing.T) {
	fsmtest.Reachable(t, SyncTable)
}

func TestSyncTableMatchesSeed(t *testing.T) {
	seed := fsmtest.SeedEdges(t, "../../docs/seeds/state-flow.md", "## 3. Bundle sync (worker side)")
	fsmtest.MatchSeed(t, SyncTable, seed, []fsmkit.Edge{
		// An invalid or unsafe manifest is refused before anything is staged.
		fsmtest.Edge("fetch_manifest", "reject", "manifestRejected"),
		// A pinned hash that differs is refused, on the degraded path too.
		fsmtest.Edge("fetch_manifest", "reject", "pinMismatch"),
		fsmtest.Edge("use_stale_cache", "reject", "pinMismatch"),
		// Failures of the steps themselves: cancelled, fetch retries
		// exhausted, cache not writable.
		fsmtest.Edge("fetch_manifest", "fail_fast", "failed"),
		fsmtest.Edge("cache_check", "fail_fast", "failed"),
		fsmtest.Edge("diffing", "fail_fast", "failed"),
		fsmtest.Edge("fetching", "fail_fast", "failed"),
		fsmtest.Edge("validating", "fail_fast", "failed"),
		fsmtest.Edge("swapping", "fail_fast", "failed"),
	})
}

func TestSyncTableGolden(t *testing.T) {
	fsmtest.Golden(t, SyncTable, "testdata/bundle-sync.mmd")
}
