package dialer

import (
	"slices"
	"testing"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestTableMatrix(t *testing.T) {
	// Written from the seed's "Triggers and Actions" and the two documented
	// departures (see TestTableMatchesSeed), not from the table.
	fsmtest.Matrix(t, Table, map[State]map[Event]State{
		StateNone: {
			EventScanned:      StateNeedsDial,
			EventUpdated:      StateNeedsDial,
			EventDisconnected: StateNeedsDial,
		},
		StateNeedsDial: {
			EventDispatched:          StateDialing,
			EventPoolFull:            StateNeedsDial,
			EventConnectedExternally: StateConnected,
			EventDeleted:             StateRemoved,
			EventNoEndpoints:         StateRemoved,
		},
		StateDialing: {
			EventDialFailed:          StateNeedsDial,
			EventDialSucceeded:       StateConnected,
			EventConnectedExternally: StateConnected,
			EventDeleted:             StateRemoved,
			EventNoEndpoints:         StateRemoved,
		},
		StateConnected: {
			EventSurvived:   StateRemoved,
			EventLostFast:   StateNeedsDial,
			EventLostNormal: StateNeedsDial,
			EventDeleted:    StateRemoved,
		},
		StateRemoved: {},
	})
}

func TestTableReachable(t *testing.T) {
	fsmtest.Reachable(t, Table)
}

// seedEdges transcribes ctrl-dialer-state-machine.md by hand: the seed draws
// its machine in ASCII art and prose, not Mermaid. One edge per trigger and
// outcome; "(none)" is None and "(removed)" is Removed (see State). Labels
// are the seed's words.
func seedEdges() []fsmkit.Edge {
	e := fsmtest.Edge
	return []fsmkit.Edge{
		// State table: "(none)" is where a router without an entry is.
		e("[*]", "None", ""),
		// "Entry into tracking — (none) -> NeedsDial": three triggers.
		e("None", "NeedsDial", "routerDisconnectedEvent"),
		e("None", "NeedsDial", "routerUpdatedEvent"),
		e("None", "NeedsDial", "scan()"),
		// "NeedsDial -> Dialing".
		e("NeedsDial", "Dialing", "evaluateRetryQueue pops a due state"),
		// "Dialing -> NeedsDial (dial failed)".
		e("Dialing", "NeedsDial", "dial failed"),
		// Same section: "If the pool is full ... the same backoff is applied
		// without ever entering Dialing."
		e("NeedsDial", "NeedsDial", "pool full"),
		// "Dialing -> Connected (dial succeeded)".
		e("Dialing", "Connected", "dial succeeded"),
		// "Connected -> (removed) (connection survived)".
		e("Connected", "Removed", "connection survived"),
		// "Connected -> NeedsDial (fast failure)".
		e("Connected", "NeedsDial", "fast failure"),
		// "Connected -> NeedsDial (normal disconnect)".
		e("Connected", "NeedsDial", "normal disconnect"),
		// Same section: connectionLost() when "the state is not Connected"
		// takes the normal path too.
		e("NeedsDial", "NeedsDial", "connection lost while not Connected"),
		e("Dialing", "NeedsDial", "connection lost while not Connected"),
		// "Any state -> (removed) (router deleted)": every tracked state.
		e("NeedsDial", "Removed", "router deleted"),
		e("Dialing", "Removed", "router deleted"),
		e("Connected", "Removed", "router deleted"),
		// "Any state -> (removed) (no endpoints)": found by
		// evaluateDialState (a due NeedsDial) or routerUpdatedEvent. Upstream
		// ignores an update while Connected (notes §1.3 row 17), and its
		// evaluation of a Connected entry takes the survived/lost path, so
		// "any state" is NeedsDial and Dialing.
		e("NeedsDial", "Removed", "no endpoints"),
		e("Dialing", "Removed", "no endpoints"),
		// "External connection — routerConnectedEvent ... resets the state
		// to Connected": from every tracked state.
		e("NeedsDial", "Connected", "routerConnectedEvent"),
		e("Dialing", "Connected", "routerConnectedEvent"),
		e("Connected", "Connected", "routerConnectedEvent"),
		// "(removed)" ends the entry's life.
		e("Removed", "[*]", ""),
	}
}

// departures are seed edges the table leaves out on purpose; the events are
// rejected as stale in those states instead.
func departures() []fsmkit.Edge {
	e := fsmtest.Edge
	return []fsmkit.Edge{
		// A disconnect for a record that is not Connected repeats a loss
		// already handled (upstream reports every loss twice); taking the
		// normal path would reset a fast-failure backoff (notes §1.13 #2).
		// TestFix_DuplicateDisconnectKeepsFastFailureBackoff.
		e("NeedsDial", "NeedsDial", "connection lost while not Connected"),
		e("Dialing", "NeedsDial", "connection lost while not Connected"),
		// A connection reported for a Connected record is the one already
		// accounted for, usually the dialer's own; resetting would wipe the
		// fast-failure accounting (notes §1.13 #3).
		// TestFix_ConnectedAfterOwnDialKeepsFastFailureAccounting.
		e("Connected", "Connected", "routerConnectedEvent"),
	}
}

func TestTableMatchesSeed(t *testing.T) {
	want := seedEdges()
	for _, d := range departures() {
		i := slices.Index(want, d)
		if i < 0 {
			t.Fatalf("departure %v is not a seed edge", d)
		}
		want = slices.Delete(want, i, i+1)
	}
	// No additions: every other edge of the table is the seed's.
	fsmtest.MatchSeed(t, Table, want, nil)
}

func TestTableGolden(t *testing.T) {
	fsmtest.Golden(t, Table, "testdata/dialer.mmd")
}

func TestTableName(t *testing.T) {
	if Table.Name() != "dialer" {
		t.Errorf("examples/fsmdiagrams renders the table as %q, want dialer", Table.Name())
	}
}

// examples/fsmdiagrams parses what it prints; the table must survive that.
func TestTableRendersParseableMermaid(t *testing.T) {
	edges, err := fsmkit.ParseMermaid(Table.Mermaid())
	if err != nil {
		t.Fatal(err)
	}
	if len(edges) != len(Table.Edges()) {
		t.Errorf("parsed %d edges, the table has %d", len(edges), len(Table.Edges()))
	}
}
