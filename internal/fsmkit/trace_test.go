package fsmkit_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/fsmkit/fsmtest"
	"example.com/pifleet/internal/fsmkit/internal/doordriver"
)

// TestTraceRecordsDriversOnly: the trace records what a driver fires (the
// door package), not what a test fires itself nor fsmtest's matrix.
func TestTraceRecordsDriversOnly(t *testing.T) {
	fsmkit.EnableTrace()
	if !fsmkit.TraceEnabled() {
		t.Fatal("trace not on")
	}
	// Fired from this test file, and by the matrix: nothing recorded.
	m := doordriver.Table.Start()
	if err := m.Fire("open"); err != nil {
		t.Fatal(err)
	}
	_ = m.Fire("open") // stale, from a test: not recorded either
	fsmtest.Matrix(t, doordriver.Table, map[string]map[string]string{
		"closed": {"open": "opened", "knock": "closed"},
		"opened": {"close": "closed"},
	})
	if got := doordriver.Table.FiredEdges(); len(got) != 0 {
		t.Fatalf("fired from tests but recorded: %v", got)
	}
	if got := staleOf("door"); len(got) != 0 {
		t.Fatalf("stale from tests but recorded: %v", got)
	}

	// Fired by the driver: recorded, the stale one with where it came from.
	if errs := doordriver.Drive("open", "close", "close"); len(errs) != 1 {
		t.Fatalf("driver errors: %v", errs)
	}
	want := []fsmkit.Edge{{Src: "closed", Dst: "opened", Label: "open"}, {Src: "opened", Dst: "closed", Label: "close"}}
	if d := cmp.Diff(want, doordriver.Table.FiredEdges()); d != "" {
		t.Errorf("fired edges (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]fsmkit.Edge{{Src: "closed", Dst: "closed", Label: "knock"}}, doordriver.Table.UnfiredEdges()); d != "" {
		t.Errorf("unfired edges (-want +got):\n%s", d)
	}
	stale := staleOf("door")
	if len(stale) != 1 || stale[0].State != "closed" || stale[0].Event != "close" || stale[0].Count != 1 ||
		!strings.Contains(stale[0].Site, "doordriver/door.go") {
		t.Fatalf("stale events: %v", stale)
	}
	doordriver.Drive("close")
	if stale := staleOf("door"); len(stale) != 1 || stale[0].Count != 2 {
		t.Errorf("a second stale close: %v", stale)
	}
}

func staleOf(machine string) []fsmkit.StaleRecord {
	all := fsmkit.StaleEvents()
	return slices.DeleteFunc(all, func(r fsmkit.StaleRecord) bool { return r.Machine != machine })
}
