package session

import "example.com/pifleet/internal/fsmkit"

// RegistryState is where the server's projection of one agent's sessions
// stands.
type RegistryState string

// RegistryEvent moves a machine's projection between RegistryStates.
type RegistryEvent string

// The states of a projection.
const (
	// StateStaleProjection: the projection may differ from the agent's
	// files (no connection, or connected but no full report yet). It is
	// kept, for reading, but not trusted.
	StateStaleProjection RegistryState = "stale_projection"
	// StateReconciling: a full report is arriving (one page or several).
	StateReconciling RegistryState = "reconciling"
	// StateSynced: the projection equals the agent's last full report plus
	// every incremental report since.
	StateSynced RegistryState = "synced"
	// StateCatchUp: the server reattached to a live session and is reading
	// the entries it missed.
	StateCatchUp RegistryState = "catch_up"
)

// Registry events. Each outcome of one trigger is its own event.
const (
	// EventReportReceived: the first (or only) page of a full report.
	EventReportReceived RegistryEvent = "reportReceived"
	// EventPageReceived: a further page of a paged full report (a large
	// inventory needs several frames).
	EventPageReceived RegistryEvent = "pageReceived"
	// EventReconciled: the whole full report is applied; the projection
	// equals the agent's listing.
	EventReconciled RegistryEvent = "reconciled"
	// EventReportRejected: the full report was inconsistent (duplicate
	// paths, pages out of order) and was not applied.
	EventReportRejected RegistryEvent = "reportRejected"
	// EventIncrementalReport: added, updated and removed sessions applied.
	EventIncrementalReport RegistryEvent = "incrementalReport"
	// EventReattach: the server reattached to a live session and starts
	// reading the entries it missed.
	EventReattach RegistryEvent = "reattach"
	// EventCaughtUp: the missed entries (read after the last seen entry id)
	// are applied.
	EventCaughtUp RegistryEvent = "caughtUp"
	// EventConnectionLost: the connection to the agent ended.
	EventConnectionLost RegistryEvent = "connectionLost"
)

// RegistryTable is the session registry reconciliation, one machine per
// agent. It covers pages of a paged full report; a rejected report; a
// connection lost while
// reconciling or catching up (it can end at any time); incremental reports
// applied during a catch-up (they concern other sessions' files and keep
// flowing).
var RegistryTable = fsmkit.MustTable(fsmkit.Spec[RegistryState, RegistryEvent]{
	Name:    "session-registry",
	Initial: StateStaleProjection,
	Transitions: []fsmkit.Transition[RegistryState, RegistryEvent]{
		{Event: EventReportReceived, Src: []RegistryState{StateStaleProjection}, Dst: StateReconciling},
		{Event: EventPageReceived, Src: []RegistryState{StateReconciling}, Dst: StateReconciling},
		{Event: EventReconciled, Src: []RegistryState{StateReconciling}, Dst: StateSynced},
		{Event: EventReportRejected, Src: []RegistryState{StateReconciling}, Dst: StateStaleProjection},
		{Event: EventIncrementalReport, Src: []RegistryState{StateSynced}, Dst: StateSynced},
		{Event: EventIncrementalReport, Src: []RegistryState{StateCatchUp}, Dst: StateCatchUp},
		{Event: EventReattach, Src: []RegistryState{StateSynced}, Dst: StateCatchUp},
		{Event: EventCaughtUp, Src: []RegistryState{StateCatchUp}, Dst: StateSynced},
		{Event: EventConnectionLost, Src: []RegistryState{StateSynced, StateReconciling, StateCatchUp}, Dst: StateStaleProjection},
	},
})
