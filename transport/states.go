package transport

import "example.com/pifleet/internal/fsmkit"

// ConnState is a state of the server ⇄ agent connection lifecycle.
type ConnState string

// ConnEvent moves a connection between ConnStates.
type ConnEvent string

// The states of a connection. closed is a connection that its owner shut
// down on purpose, which is never retried.
const (
	StateConnecting     ConnState = "connecting"
	StateAuthenticating ConnState = "authenticating"
	StateEstablished    ConnState = "established"
	StateRejected       ConnState = "rejected"
	StateLost           ConnState = "lost"
	StateClosed         ConnState = "closed"
)

// Connection events. Each outcome of one trigger is its own event, so the
// diagram shows every edge.
const (
	// EventTCPEstablished: the TCP connection is up; identity is checked next.
	EventTCPEstablished ConnEvent = "tcpEstablished"
	// EventAllowed: whois resolved a peer that trust allows (stored or confirmed).
	EventAllowed ConnEvent = "allowed"
	// EventDenied: whois failed, or trust denies the peer.
	EventDenied ConnEvent = "denied"
	// EventConnectionLost: expiry, peer close, I/O or fatal protocol error.
	EventConnectionLost ConnEvent = "connectionLost"
	// EventRetry: the reconnect delay (1 s, 2 s, 4 s … 30 s) has passed.
	EventRetry ConnEvent = "retry"
	// EventDialFailed: the TCP dial itself failed; the reconnect delay is
	// waited out in lost.
	EventDialFailed ConnEvent = "dialFailed"
	// EventHandshakeFailed: the connection dropped or timed out before the
	// peer was authenticated; the delay is waited out in lost too.
	EventHandshakeFailed ConnEvent = "handshakeFailed"
	// EventClose: the owner closed the connection on purpose.
	EventClose ConnEvent = "close"
)

// ConnectionTable is the connection lifecycle as a table.
//
// A heartbeat is not an edge (a self-loop on established): a
// heartbeat changes no state, it re-arms the connection's expiry, which
// Conn does itself (Options.OnHeartbeat sees each one). No driver could
// fire it for anything but a log line.
var ConnectionTable = fsmkit.MustTable(fsmkit.Spec[ConnState, ConnEvent]{
	Name:    "connection",
	Initial: StateConnecting,
	Final:   []ConnState{StateRejected, StateClosed},
	Transitions: []fsmkit.Transition[ConnState, ConnEvent]{
		{Event: EventTCPEstablished, Src: []ConnState{StateConnecting}, Dst: StateAuthenticating},
		{Event: EventAllowed, Src: []ConnState{StateAuthenticating}, Dst: StateEstablished},
		{Event: EventDenied, Src: []ConnState{StateAuthenticating}, Dst: StateRejected},
		{Event: EventConnectionLost, Src: []ConnState{StateEstablished}, Dst: StateLost},
		{Event: EventRetry, Src: []ConnState{StateLost}, Dst: StateConnecting},
		{Event: EventDialFailed, Src: []ConnState{StateConnecting}, Dst: StateLost},
		{Event: EventHandshakeFailed, Src: []ConnState{StateAuthenticating}, Dst: StateLost},
		{Event: EventClose, Src: []ConnState{StateConnecting, StateAuthenticating, StateEstablished, StateLost}, Dst: StateClosed},
	},
})
