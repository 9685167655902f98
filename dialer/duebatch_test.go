package dialer

import (
	"fmt"
	"slices"
	"testing"
)

// Records due at once, however many, are handled a bounded batch per
// call, so that the loop gets back to the dials' results and the notices
// between batches (a dialer whose due records outran its loop starved
// its results: BENCHMARKS.md, 10,000 agents); successive calls handle
// every one of them once, earliest first.
func TestRunDueHandlesABoundedBatch(t *testing.T) {
	g := newEngineRig(t, testConfig())
	var handled []string
	g.e.observe = func(r *record, from State, _ Event, _ instant) {
		if from == StateNeedsDial {
			handled = append(handled, r.id)
		}
	}
	const targets = 3*dueBatch + 7
	var ids []string
	for i := range targets {
		id := fmt.Sprintf("t%05d", i)
		ids = append(ids, id)
		g.dir.add(id, "10.0.0.1:9788")
		g.e.updated(g.now, id)
	}
	calls := 0
	for more := true; more; calls++ {
		before := len(handled)
		more = g.e.runDue(g.now, dueBatch)
		if n := len(handled) - before; n > dueBatch {
			t.Fatalf("call %d handled %d due records, want at most %d", calls, n, dueBatch)
		}
	}
	if want := (targets + dueBatch - 1) / dueBatch; calls != want {
		t.Errorf("%d calls to handle %d due records, want %d", calls, targets, want)
	}
	if !slices.Equal(handled, ids) {
		t.Errorf("handled %d records (first %v), want each of the %d once, earliest first", len(handled), handled[:min(3, len(handled))], targets)
	}
	if next, ok := g.e.nextDue(); ok && next <= g.now {
		t.Errorf("a record is still due after the last batch (at %v)", next)
	}
	checkHeap(t, g.e)
}
