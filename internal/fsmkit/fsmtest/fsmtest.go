// Package fsmtest holds the checks every pifleet state machine gets:
//
//   - Matrix: every state × event outcome against an expectation written
//     independently of the table, checked both on fsmkit's compiled index and
//     on a looplab/fsm machine built from the same table (the oracle);
//   - Reachable: every state can be reached from the initial one, and every
//     non-final state can still reach a final one when the machine has any;
//   - MatchSeed: the table's arrows equal the seed diagram's arrows (as a
//     multiset of source → destination pairs, since seed labels are prose),
//     plus documented additions;
//   - Golden: the rendered Mermaid equals a file in testdata, rewritten by
//     `go test -update`.
package fsmtest

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/looplab/fsm"

	"example.com/pifleet/internal/fsmkit"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Invalid marks, in a Matrix expectation, that an event is rejected in a state.
const Invalid = "(invalid)"

// Matrix checks every state × event of table. want maps a state to the
// outcome of each event that is valid there (the destination state);
// every event not listed for a state must be rejected as stale. Both the
// compiled index and a looplab machine restored to the state must agree.
func Matrix[S, E ~string](t testing.TB, table *fsmkit.Table[S, E], want map[S]map[E]S) {
	t.Helper()
	for s := range want {
		if !slices.Contains(table.States(), s) {
			t.Errorf("expectation names state %q that the table lacks", s)
		}
		for e := range want[s] {
			if !slices.Contains(table.Events(), e) {
				t.Errorf("expectation names event %q that the table lacks", e)
			}
		}
	}
	for _, s := range table.States() {
		for _, e := range table.Events() {
			expect := Invalid
			if d, ok := want[s][e]; ok {
				expect = string(d)
			}
			if got := kitOutcome(table, s, e); got != expect {
				t.Errorf("%s: %s --%s--> %s, want %s", table.Name(), s, e, got, expect)
			}
			if got := looplabOutcome(table, s, e); got != expect {
				t.Errorf("%s (looplab oracle): %s --%s--> %s, want %s", table.Name(), s, e, got, expect)
			}
		}
	}
}

func kitOutcome[S, E ~string](table *fsmkit.Table[S, E], s S, e E) string {
	m, err := table.Restore(s)
	if err != nil {
		return "restore failed: " + err.Error()
	}
	before := m.State()
	if err := m.Fire(e); err != nil {
		if !errors.Is(err, fsmkit.ErrStaleEvent) {
			return "unexpected error: " + err.Error()
		}
		if m.State() != before {
			return "rejected but moved to " + string(m.State())
		}
		return Invalid
	}
	return string(m.State())
}

func looplabOutcome[S, E ~string](table *fsmkit.Table[S, E], s S, e E) string {
	f := fsm.NewFSM(string(s), table.Looplab(), fsm.Callbacks{})
	err := f.Event(context.Background(), string(e))
	var invalid fsm.InvalidEventError
	var noTransition fsm.NoTransitionError
	switch {
	case err == nil:
		return f.Current()
	case errors.As(err, &invalid):
		return Invalid
	case errors.As(err, &noTransition) && noTransition.Err == nil:
		return f.Current() // a self-loop
	default:
		return "looplab error: " + err.Error()
	}
}

// Reachable checks that every state is reachable from the initial state and,
// when the table declares final states, that every state can still reach one
// (no trap states).
func Reachable[S, E ~string](t testing.TB, table *fsmkit.Table[S, E]) {
	t.Helper()
	succ := map[S][]S{}
	for _, s := range table.States() {
		for _, e := range table.Events() {
			if d, ok := table.Next(s, e); ok {
				succ[s] = append(succ[s], d)
			}
		}
	}
	seen := walk(table.Initial(), succ)
	for _, s := range table.States() {
		if !seen[s] {
			t.Errorf("%s: state %s is unreachable from %s", table.Name(), s, table.Initial())
		}
	}
	if len(table.Final()) == 0 {
		return
	}
	for _, s := range table.States() {
		reach := walk(s, succ)
		if !slices.ContainsFunc(table.Final(), func(f S) bool { return reach[f] }) {
			t.Errorf("%s: state %s cannot reach any final state", table.Name(), s)
		}
	}
}

func walk[S comparable](from S, succ map[S][]S) map[S]bool {
	seen := map[S]bool{from: true}
	queue := []S{from}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, d := range succ[s] {
			if !seen[d] {
				seen[d] = true
				queue = append(queue, d)
			}
		}
	}
	return seen
}

// SeedEdges reads the Mermaid diagram under heading in the markdown file at
// path (a copy of a seed document under docs/seeds) and returns its edges.
func SeedEdges(t testing.TB, path, heading string) []fsmkit.Edge {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading seed: %v", err)
	}
	block, err := fsmkit.MermaidBlock(string(raw), heading)
	if err != nil {
		t.Fatalf("seed %s: %v", path, err)
	}
	edges, err := fsmkit.ParseMermaid(block)
	if err != nil {
		t.Fatalf("seed %s: %v", path, err)
	}
	return edges
}

// MatchSeed checks that the arrows the table renders are exactly the seed's
// arrows plus the documented additions, compared as multisets of
// "source --> destination" (one trigger with two outcomes in the seed must be
// two events in the table). Labels are ignored: the seed's are prose.
func MatchSeed[S, E ~string](t testing.TB, table *fsmkit.Table[S, E], seed, additions []fsmkit.Edge) {
	t.Helper()
	want := arrows(append(slices.Clone(seed), additions...))
	got := arrows(table.Edges())
	if d := gocmp.Diff(want, got); d != "" {
		t.Errorf("%s: rendered arrows differ from the seed (+ documented additions) (-seed +table):\n%s", table.Name(), d)
	}
}

// Without returns seed without the arrows of removed (compared as
// "source --> destination", like MatchSeed): the seed's arrows that the
// table leaves out on purpose, each documented where it is listed. It
// fails the test for an arrow the seed does not have.
func Without(t testing.TB, seed []fsmkit.Edge, removed ...fsmkit.Edge) []fsmkit.Edge {
	t.Helper()
	out := slices.Clone(seed)
	for _, r := range removed {
		i := slices.IndexFunc(out, func(e fsmkit.Edge) bool { return e.Src == r.Src && e.Dst == r.Dst })
		if i < 0 {
			t.Errorf("the seed has no arrow %s --> %s to leave out", r.Src, r.Dst)
			continue
		}
		out = slices.Delete(out, i, i+1)
	}
	return out
}

func arrows(edges []fsmkit.Edge) []string {
	out := make([]string, len(edges))
	for i, e := range edges {
		out[i] = e.Src + " --> " + e.Dst
	}
	slices.SortFunc(out, cmp.Compare)
	return out
}

// Golden compares table.Mermaid() with the file at path; with -update it
// rewrites the file instead.
func Golden[S, E ~string](t testing.TB, table *fsmkit.Table[S, E], path string) {
	t.Helper()
	got := table.Mermaid()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if d := gocmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("%s: Mermaid differs from %s (-golden +rendered); run go test -update if the change is intended:\n%s", table.Name(), path, d)
	}
}

// Edge is a shorthand for writing documented additions in tests.
func Edge(src, dst, label string) fsmkit.Edge {
	return fsmkit.Edge{Src: src, Dst: dst, Label: label}
}

// String renders edges one per line, for messages.
func String(edges []fsmkit.Edge) string {
	var b strings.Builder
	for _, e := range edges {
		fmt.Fprintf(&b, "%s --> %s: %s\n", e.Src, e.Dst, e.Label)
	}
	return b.String()
}
