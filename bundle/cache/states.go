package cache

import "example.com/pifleet/internal/fsmkit"

// SyncState is a state of a bundle sync.
type SyncState string

// SyncEvent moves a sync between SyncStates.
type SyncEvent string

// The states of a bundle sync.
const (
	StateFetchManifest SyncState = "fetch_manifest"
	StateCacheCheck    SyncState = "cache_check"
	StateDiffing       SyncState = "diffing"
	StateFetching      SyncState = "fetching"
	StateValidating    SyncState = "validating"
	StateSwapping      SyncState = "swapping"
	StateReady         SyncState = "ready"
	StateUseStaleCache SyncState = "use_stale_cache"
	StateReadyDegraded SyncState = "ready_degraded"
	StateReject        SyncState = "reject"
	StateFailFast      SyncState = "fail_fast"
)

// Sync events. Each outcome of one step is its own event, so the diagram
// shows every edge.
const (
	// EventManifestOK: the registry served a valid manifest (and the pin,
	// if any, matches).
	EventManifestOK SyncEvent = "manifestOK"
	// EventRegistryDownCached: the registry is unreachable or does not
	// know the bundle, and a usable cached copy exists.
	EventRegistryDownCached SyncEvent = "registryDownCached"
	// EventRegistryDownNoCache: the same, without a cached copy.
	EventRegistryDownNoCache SyncEvent = "registryDownNoCache"
	// EventManifestRejected: the served manifest is invalid or lists an
	// unsafe path; paths are checked before anything is written.
	EventManifestRejected SyncEvent = "manifestRejected"
	// EventPinMismatch: the bundle version differs from the pinned hash,
	// on the normal and the degraded path.
	EventPinMismatch SyncEvent = "pinMismatch"
	// EventCacheHit: <cache>/<bundleHash>/ already exists.
	EventCacheHit SyncEvent = "cacheHit"
	// EventCacheMiss: it does not; the previous version is diffed.
	EventCacheMiss SyncEvent = "cacheMiss"
	// EventDiffed: the changed and added files are known and a staging
	// directory is ready.
	EventDiffed SyncEvent = "diffed"
	// EventFilesStaged: every file is in the staging directory, fetched or
	// reused, each verified by SHA-256.
	EventFilesStaged SyncEvent = "filesStaged"
	// EventTreeRejected: the staged tree is not exactly the manifest's
	// files (path-safety violation); nothing reaches the cache.
	EventTreeRejected SyncEvent = "treeRejected"
	// EventVerified: the staged tree is exactly the manifest's files.
	EventVerified SyncEvent = "verified"
	// EventSwapped: the staging directory was renamed to <bundleHash>/
	// and the bundle's pointer updated.
	EventSwapped SyncEvent = "swapped"
	// EventStaleCacheUsed: the cached copy is what the worker starts with.
	EventStaleCacheUsed SyncEvent = "staleCacheUsed"
	// EventRejected: a rejection ends the sync.
	EventRejected SyncEvent = "rejected"
	// EventFailed: a step failed (files could not be fetched after their
	// retries, the cache could not be written, the sync was cancelled).
	EventFailed SyncEvent = "failed"
)

// SyncTable is the bundle sync as a table; the name that
// examples/fsmdiagrams prints is "bundle-sync".
var SyncTable = fsmkit.MustTable(fsmkit.Spec[SyncState, SyncEvent]{
	Name:    "bundle-sync",
	Initial: StateFetchManifest,
	Final:   []SyncState{StateReady, StateReadyDegraded, StateFailFast},
	Transitions: []fsmkit.Transition[SyncState, SyncEvent]{
		{Event: EventManifestOK, Src: []SyncState{StateFetchManifest}, Dst: StateCacheCheck},
		{Event: EventRegistryDownCached, Src: []SyncState{StateFetchManifest}, Dst: StateUseStaleCache},
		{Event: EventRegistryDownNoCache, Src: []SyncState{StateFetchManifest}, Dst: StateFailFast},
		{Event: EventManifestRejected, Src: []SyncState{StateFetchManifest}, Dst: StateReject},
		{Event: EventPinMismatch, Src: []SyncState{StateFetchManifest, StateUseStaleCache}, Dst: StateReject},
		{Event: EventCacheHit, Src: []SyncState{StateCacheCheck}, Dst: StateReady},
		{Event: EventCacheMiss, Src: []SyncState{StateCacheCheck}, Dst: StateDiffing},
		{Event: EventDiffed, Src: []SyncState{StateDiffing}, Dst: StateFetching},
		{Event: EventFilesStaged, Src: []SyncState{StateFetching}, Dst: StateValidating},
		{Event: EventTreeRejected, Src: []SyncState{StateValidating}, Dst: StateReject},
		{Event: EventVerified, Src: []SyncState{StateValidating}, Dst: StateSwapping},
		{Event: EventSwapped, Src: []SyncState{StateSwapping}, Dst: StateReady},
		{Event: EventStaleCacheUsed, Src: []SyncState{StateUseStaleCache}, Dst: StateReadyDegraded},
		{Event: EventRejected, Src: []SyncState{StateReject}, Dst: StateFailFast},
		{Event: EventFailed, Src: []SyncState{StateFetchManifest, StateCacheCheck, StateDiffing, StateFetching, StateValidating, StateSwapping}, Dst: StateFailFast},
	},
})
