package dialer

import "example.com/pifleet/internal/fsmkit"

// State is where one target stands in the dial machine. NeedsDial,
// Dialing and Connected are OpenZiti's names; OpenZiti writes the other two
// as "(none)" and "(removed)", which are not identifiers a Mermaid diagram
// accepts; they are None and Removed here:
//
//	OpenZiti    table
//	(none)      None       no record: a fresh record starts here and leaves at once
//	NeedsDial   NeedsDial  waiting on the retry heap for its next dial
//	Dialing     Dialing    handed to the pool (queued or dialling)
//	Connected   Connected  connected; waiting out the fast-failure window
//	(removed)   Removed    record dropped; the target is untracked again
//
// A record exists only between None and Removed. Once removed, a target is
// not dialled again until a new trigger (a scan, Updated, Disconnected)
// gives it a new record, which starts in None.
type State string

// Event moves a target between States. When one trigger has
// several outcomes, each outcome is its own event (lostFast and lostNormal,
// dialFailed and poolFull), so the diagram shows every edge.
type Event string

// The states of a target.
const (
	StateNone      State = "None"
	StateNeedsDial State = "NeedsDial"
	StateDialing   State = "Dialing"
	StateConnected State = "Connected"
	StateRemoved   State = "Removed"
)

// The events of a target. Each names the trigger, and the comment the
// action the driver takes once the transition succeeded.
const (
	// EventScanned: a scan found an untracked target that is eligible, has
	// addresses and is not connected. Its first dial is spread out: the
	// k-th target a scan discovers is due k × ScanSpread later.
	EventScanned Event = "scanned"
	// EventUpdated: Dialer.Updated for an untracked target that needs a
	// dial. Due at once.
	EventUpdated Event = "updated"
	// EventDisconnected: Dialer.Disconnected for an untracked target that
	// needs a dial (a connection lost while not Connected: backoff
	// reset). Due at once.
	EventDisconnected Event = "disconnected"
	// EventDispatched: the target fell due and the pool took the dial
	// (running or queued). The address is fixed at this moment.
	EventDispatched Event = "dispatched"
	// EventPoolFull: the target fell due but the pool and its queue were
	// full. The dial-failed backoff applies and the address rotates,
	// without ever entering Dialing.
	EventPoolFull Event = "poolFull"
	// EventDialFailed: the dial returned an error. Backoff grows, the
	// address rotates, the target waits on the heap again.
	EventDialFailed Event = "dialFailed"
	// EventDialSucceeded: the dial returned a connection. The retry delay
	// is kept, so a fast failure continues the progression; the survival
	// check is due FastFailureWindow later.
	EventDialSucceeded Event = "dialSucceeded"
	// EventSurvived: the survival check found the target still connected.
	// The backoff is reset and the record dropped.
	EventSurvived Event = "survived"
	// EventLostFast: the connection was lost within FastFailureWindow of
	// being made. Treated as a failed dial: backoff continues.
	EventLostFast Event = "lostFast"
	// EventLostNormal: the connection was lost after FastFailureWindow.
	// Backoff and address index reset; due at once.
	EventLostNormal Event = "lostNormal"
	// EventConnectedExternally: a connection that the dialer did not make
	// was reported (the target dialled in). Backoff reset; the survival
	// check is due FastFailureWindow later.
	EventConnectedExternally Event = "connectedExternally"
	// EventDeleted: Dialer.Deleted. The record is dropped; a dial in
	// flight is cancelled and its result ignored.
	EventDeleted Event = "deleted"
	// EventNoEndpoints: the directory no longer offers a dial (ineligible,
	// no addresses, or connected by other means). The record is dropped.
	EventNoEndpoints Event = "noEndpoints"
)

// Table is the dial machine of one target, as a table. examples/fsmdiagrams
// renders it under the name "dialer".
//
// Two deliberate departures from OpenZiti's design, both regression-tested:
// a disconnect reported for a target in NeedsDial or Dialing is stale (it
// is a duplicate of a loss already handled, and resetting there would undo
// a fast-failure backoff), and a connection reported for a target already
// Connected is stale (it is usually the dialer's own connection, and
// resetting there would undo the fast-failure accounting).
var Table = fsmkit.MustTable(fsmkit.Spec[State, Event]{
	Name:    "dialer",
	Initial: StateNone,
	Final:   []State{StateRemoved},
	Transitions: []fsmkit.Transition[State, Event]{
		{Event: EventScanned, Src: []State{StateNone}, Dst: StateNeedsDial},
		{Event: EventUpdated, Src: []State{StateNone}, Dst: StateNeedsDial},
		{Event: EventDisconnected, Src: []State{StateNone}, Dst: StateNeedsDial},
		{Event: EventDispatched, Src: []State{StateNeedsDial}, Dst: StateDialing},
		{Event: EventPoolFull, Src: []State{StateNeedsDial}, Dst: StateNeedsDial},
		{Event: EventDialFailed, Src: []State{StateDialing}, Dst: StateNeedsDial},
		{Event: EventDialSucceeded, Src: []State{StateDialing}, Dst: StateConnected},
		{Event: EventSurvived, Src: []State{StateConnected}, Dst: StateRemoved},
		{Event: EventLostFast, Src: []State{StateConnected}, Dst: StateNeedsDial},
		{Event: EventLostNormal, Src: []State{StateConnected}, Dst: StateNeedsDial},
		{Event: EventConnectedExternally, Src: []State{StateNeedsDial, StateDialing}, Dst: StateConnected},
		{Event: EventDeleted, Src: []State{StateNeedsDial, StateDialing, StateConnected}, Dst: StateRemoved},
		{Event: EventNoEndpoints, Src: []State{StateNeedsDial, StateDialing}, Dst: StateRemoved},
	},
})
