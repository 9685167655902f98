package rebundle

import "example.com/pifleet/internal/fsmkit"

// State is a state of a runtime rebundle.
type State string

// Event moves a rebundle between States.
type Event string

// The states of a rebundle.
const (
	StateRunningOld State = "running_old"
	StateSyncing    State = "syncing"
	StateReloading  State = "reloading"
	StateRunningNew State = "running_new"
	StateUnchanged  State = "unchanged"
)

// Rebundle events.
const (
	// EventUse: the worker was asked to use another bundle ("/fleet-use B").
	EventUse Event = "use"
	// EventSynced: bundle B is in the cache (ready or ready_degraded).
	EventSynced Event = "synced"
	// EventSyncFailed: B could not be synced; the worker keeps A.
	EventSyncFailed Event = "syncFailed"
	// EventReloaded: the worker restarted on the same session with B.
	EventReloaded Event = "reloaded"
	// EventReloadFailed: the restart with B failed and the worker is back
	// on A.
	EventReloadFailed Event = "reloadFailed"
	// EventKept: the failure was reported; the worker runs A as before.
	EventKept Event = "kept"
)

// Table is the runtime rebundle as a table; examples/fsmdiagrams
// prints it as "rebundle".
var Table = fsmkit.MustTable(fsmkit.Spec[State, Event]{
	Name:    "rebundle",
	Initial: StateRunningOld,
	Final:   []State{StateRunningNew},
	Transitions: []fsmkit.Transition[State, Event]{
		{Event: EventUse, Src: []State{StateRunningOld}, Dst: StateSyncing},
		{Event: EventSynced, Src: []State{StateSyncing}, Dst: StateReloading},
		{Event: EventSyncFailed, Src: []State{StateSyncing}, Dst: StateUnchanged},
		{Event: EventReloaded, Src: []State{StateReloading}, Dst: StateRunningNew},
		{Event: EventReloadFailed, Src: []State{StateReloading}, Dst: StateUnchanged},
		{Event: EventKept, Src: []State{StateUnchanged}, Dst: StateRunningOld},
	},
})
