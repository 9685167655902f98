package transport

import (
	"testing"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestConnectionTableMatrix(t *testing.T) {
	// Written from seed §2 and the documented additions, not from the table.
	fsmtest.Matrix(t, ConnectionTable, map[ConnState]map[ConnEvent]ConnState{
		StateConnecting: {
			EventTCPEstablished: StateAuthenticating,
			EventDialFailed:     StateLost,
			EventClose:          StateClosed,
		},
		StateAuthenticating: {
			EventAllowed:         StateEstablished,
			EventDenied:          StateRejected,
			EventHandshakeFailed: StateLost,
			EventClose:           StateClosed,
		},
		StateEstablished: {
			EventConnectionLost: StateLost,
			EventClose:          StateClosed,
		},
		StateLost: {
			EventRetry: StateConnecting,
			EventClose: StateClosed,
		},
		StateRejected: {},
		StateClosed:   {},
	})
}

func TestConnectionTableReachable(t *testing.T) {
	fsmtest.Reachable(t, ConnectionTable)
}

func TestConnectionTableMatchesSeed(t *testing.T) {
	seed := fsmtest.SeedEdges(t, "../docs/seeds/state-flow.md", "## 2. Server ⇄ agent connection lifecycle")
	seed = fsmtest.Without(t, seed,
		// A heartbeat changes no state: it re-arms the connection's expiry,
		// which Conn does itself (see ConnectionTable).
		fsmtest.Edge("established", "established", "heartbeat"),
	)
	fsmtest.MatchSeed(t, ConnectionTable, seed, []fsmkit.Edge{
		// A TCP dial that fails waits out the reconnect delay like a lost connection.
		fsmtest.Edge("connecting", "lost", "dialFailed"),
		// A connection that drops or times out before authentication finished.
		fsmtest.Edge("authenticating", "lost", "handshakeFailed"),
		// Deliberate shutdown by the owner: never retried.
		fsmtest.Edge("connecting", "closed", "close"),
		fsmtest.Edge("authenticating", "closed", "close"),
		fsmtest.Edge("established", "closed", "close"),
		fsmtest.Edge("lost", "closed", "close"),
		fsmtest.Edge("closed", "[*]", ""),
	})
}

func TestConnectionTableGolden(t *testing.T) {
	fsmtest.Golden(t, ConnectionTable, "testdata/connection.mmd")
}
