// Package fsmkit is the one way every pifleet state machine is written.
//
// A machine is declared once, as a table of looplab/fsm events with typed
// states and events (see Spec). The table is the single source of truth:
//
//   - looplab/fsm renders it (Mermaid state diagram) and, in tests, serves as
//     the oracle that every state × event outcome is checked against;
//   - entities (a connection, a dial target, a worker instance, …) carry a
//     Machine, a two-word value that fires events through an index compiled
//     from the very same table.
//
// Why entities do not each hold a *fsm.FSM: looplab builds per-instance maps
// of the whole table (about 2.1 KB for an 11-edge table, measured), and it
// wedges forever when an event is fired with a context that gets cancelled.
// The dialer tracks 100,000 targets in under 1 KiB each, so a Machine holds
// only its state and a pointer to the shared table. It has no callbacks and
// no context, so it cannot wedge; side effects belong to the driver that
// owns the machine and happen after Fire succeeded.
//
// An event that is not valid in the current state is a stale input: Fire
// returns a *StaleEventError and leaves the state unchanged, so drivers can
// log and drop it explicitly.
package fsmkit

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/looplab/fsm"
)

// Transition is one row of a table: Event moves the machine from any of Src
// to Dst. When one trigger has several outcomes, each outcome is its own
// event, so that the rendered diagram shows every edge.
type Transition[S, E ~string] struct {
	Event E
	Src   []S
	Dst   S
}

// Spec declares a machine.
type Spec[S, E ~string] struct {
	// Name is the machine's name as printed by examples/fsmdiagrams
	// ("connection", "dialer", "instance", …).
	Name string
	// Initial is the state a fresh machine starts in (the seed's [*] edge).
	Initial S
	// Final lists the states that end the machine's life (the seed's
	// "X --> [*]" edges). They have no outgoing transitions.
	Final []S
	// Transitions is the table, in the order it reads best.
	Transitions []Transition[S, E]
}

type edgeKey[S, E ~string] struct {
	src S
	ev  E
}

// Table is a validated, compiled machine declaration. It is immutable and
// safe for concurrent use.
type Table[S, E ~string] struct {
	name    string
	initial S
	final   []S
	states  []S // declaration order, initial first
	events  []E // declaration order
	rows    fsm.Events
	next    map[edgeKey[S, E]]edgeTarget[S]
	edges   []Edge        // the (source, event) pairs, in declaration order
	fired   []atomic.Bool // per edge: a driver fired it while the trace was on
}

// edgeTarget is where an (event, source) pair leads, and which of the
// table's edges it is.
type edgeTarget[S ~string] struct {
	dst  S
	edge int
}

// NewTable validates spec and compiles it. It rejects a duplicate
// (event, source) pair (looplab would silently keep the last one), final
// states with outgoing edges, and an initial state with no way out.
func NewTable[S, E ~string](spec Spec[S, E]) (*Table[S, E], error) {
	t := &Table[S, E]{
		name:    spec.Name,
		initial: spec.Initial,
		final:   slices.Clone(spec.Final),
		next:    make(map[edgeKey[S, E]]edgeTarget[S]),
	}
	if spec.Name == "" {
		return nil, errors.New("fsmkit: machine has no name")
	}
	if spec.Initial == "" {
		return nil, fmt.Errorf("fsmkit: machine %s has no initial state", spec.Name)
	}
	addState := func(s S) {
		if !slices.Contains(t.states, s) {
			t.states = append(t.states, s)
		}
	}
	addState(spec.Initial)
	for _, tr := range spec.Transitions {
		if tr.Event == "" || tr.Dst == "" || len(tr.Src) == 0 {
			return nil, fmt.Errorf("fsmkit: machine %s: incomplete transition %+v", spec.Name, tr)
		}
		if !slices.Contains(t.events, tr.Event) {
			t.events = append(t.events, tr.Event)
		}
		src := make([]string, 0, len(tr.Src))
		for _, s := range tr.Src {
			k := edgeKey[S, E]{s, tr.Event}
			if _, dup := t.next[k]; dup {
				return nil, fmt.Errorf("fsmkit: machine %s: event %s declared twice from state %s", spec.Name, tr.Event, s)
			}
			if slices.Contains(spec.Final, s) {
				return nil, fmt.Errorf("fsmkit: machine %s: final state %s has outgoing event %s", spec.Name, s, tr.Event)
			}
			t.next[k] = edgeTarget[S]{dst: tr.Dst, edge: len(t.edges)}
			t.edges = append(t.edges, Edge{Src: string(s), Dst: string(tr.Dst), Label: string(tr.Event)})
			addState(s)
			src = append(src, string(s))
		}
		addState(tr.Dst)
		t.rows = append(t.rows, fsm.EventDesc{Name: string(tr.Event), Src: src, Dst: string(tr.Dst)})
	}
	for _, f := range spec.Final {
		if !slices.Contains(t.states, f) {
			return nil, fmt.Errorf("fsmkit: machine %s: final state %s is never entered", spec.Name, f)
		}
	}
	t.fired = make([]atomic.Bool, len(t.edges))
	return t, nil
}

// MustTable is NewTable for package-level declarations; it panics on an
// invalid spec, which the package's own tests catch at once.
func MustTable[S, E ~string](spec Spec[S, E]) *Table[S, E] {
	t, err := NewTable(spec)
	if err != nil {
		panic(err)
	}
	return t
}

// Name returns the machine's name.
func (t *Table[S, E]) Name() string { return t.name }

// Initial returns the state a fresh machine starts in.
func (t *Table[S, E]) Initial() S { return t.initial }

// States returns every state, initial first, then in declaration order.
func (t *Table[S, E]) States() []S { return slices.Clone(t.states) }

// Events returns every event in declaration order.
func (t *Table[S, E]) Events() []E { return slices.Clone(t.events) }

// Final returns the final states.
func (t *Table[S, E]) Final() []S { return slices.Clone(t.final) }

// IsFinal reports whether s ends the machine's life.
func (t *Table[S, E]) IsFinal(s S) bool { return slices.Contains(t.final, s) }

// Next returns the state that ev leads to from src, and whether ev is valid
// there. It is a pure function of the table.
func (t *Table[S, E]) Next(src S, ev E) (S, bool) {
	to, ok := t.next[edgeKey[S, E]{src, ev}]
	return to.dst, ok
}

// Looplab returns the table as looplab/fsm events (a fresh copy).
func (t *Table[S, E]) Looplab() fsm.Events {
	out := make(fsm.Events, len(t.rows))
	for i, r := range t.rows {
		out[i] = fsm.EventDesc{Name: r.Name, Src: slices.Clone(r.Src), Dst: r.Dst}
	}
	return out
}

// Reference returns a fresh looplab machine in the initial state, built
// from the table. Tests use it as an oracle; it is not used to drive
// entities (see the package comment).
func (t *Table[S, E]) Reference() *fsm.FSM {
	return fsm.NewFSM(string(t.initial), t.Looplab(), fsm.Callbacks{})
}

// Mermaid renders the machine as a Mermaid state diagram: looplab's
// rendering of a fresh machine ([*] to the initial state, then one line per
// edge sorted by source state and event), followed by one "X --> [*]" line
// per final state.
func (t *Table[S, E]) Mermaid() string {
	out, err := fsm.VisualizeWithType(t.Reference(), fsm.MermaidStateDiagram)
	if err != nil {
		// Only an unknown visualisation type fails; ours is a constant.
		panic(err)
	}
	var b strings.Builder
	b.WriteString(out)
	if !strings.HasSuffix(out, "\n") {
		b.WriteByte('\n')
	}
	final := slices.Clone(t.final)
	slices.Sort(final)
	for _, f := range final {
		fmt.Fprintf(&b, "    %s --> [*]\n", f)
	}
	return b.String()
}

// Edge is one arrow of a diagram. Src or Dst is "[*]" for the start and end
// markers. Label is the event name (for a table) or the seed's prose.
type Edge struct {
	Src, Dst, Label string
}

// Edges lists every arrow the table renders: the start marker, one per
// (event, source) pair, and one per final state.
func (t *Table[S, E]) Edges() []Edge {
	edges := []Edge{{Src: "[*]", Dst: string(t.initial)}}
	for _, r := range t.rows {
		for _, s := range r.Src {
			edges = append(edges, Edge{Src: s, Dst: r.Dst, Label: r.Name})
		}
	}
	for _, f := range t.final {
		edges = append(edges, Edge{Src: string(f), Dst: "[*]"})
	}
	return edges
}

// Machine is one entity's position in a table. The zero value is not
// usable; get one from Table.Start or Table.Restore. A Machine is owned by
// one goroutine (the driver of its entity) and is not safe for concurrent
// use, like any plain value.
type Machine[S, E ~string] struct {
	table *Table[S, E]
	state S
}

// Start returns a machine in the initial state.
func (t *Table[S, E]) Start() Machine[S, E] {
	return Machine[S, E]{table: t, state: t.initial}
}

// Restore returns a machine in state s, for state read back from disk or
// reported by a peer. It fails for a state the table does not know.
func (t *Table[S, E]) Restore(s S) (Machine[S, E], error) {
	if !slices.Contains(t.states, s) {
		return Machine[S, E]{}, &UnknownStateError{Machine: t.name, State: string(s)}
	}
	return Machine[S, E]{table: t, state: s}, nil
}

// State returns the current state.
func (m *Machine[S, E]) State() S { return m.state }

// Table returns the table the machine follows.
func (m *Machine[S, E]) Table() *Table[S, E] { return m.table }

// Can reports whether ev is valid in the current state.
func (m *Machine[S, E]) Can(ev E) bool {
	_, ok := m.table.Next(m.state, ev)
	return ok
}

// Fire applies ev. When ev is not valid in the current state it returns a
// *StaleEventError (errors.Is(err, ErrStaleEvent)) and the state is
// unchanged. A self-loop is a successful transition.
func (m *Machine[S, E]) Fire(ev E) error {
	to, ok := m.table.next[edgeKey[S, E]{m.state, ev}]
	if !ok {
		if tracing.Load() {
			traceStale(m.table.name, string(m.state), string(ev))
		}
		return &StaleEventError{Machine: m.table.name, State: string(m.state), Event: string(ev)}
	}
	if tracing.Load() && !m.table.fired[to.edge].Load() && firedByDriver() {
		m.table.fired[to.edge].Store(true)
	}
	m.state = to.dst
	return nil
}

// ErrStaleEvent is matched (errors.Is) by every *StaleEventError.
var ErrStaleEvent = errors.New("event not valid in current state")

// StaleEventError reports an event that the current state does not accept:
// a late or duplicate input that the driver drops.
type StaleEventError struct {
	Machine, State, Event string
}

func (e *StaleEventError) Error() string {
	return fmt.Sprintf("%s machine: event %s is not valid in state %s", e.Machine, e.Event, e.State)
}

// Is makes errors.Is(err, ErrStaleEvent) true.
func (e *StaleEventError) Is(target error) bool { return target == ErrStaleEvent }

// UnknownStateError reports a state name that the table does not declare.
type UnknownStateError struct {
	Machine, State string
}

func (e *UnknownStateError) Error() string {
	return fmt.Sprintf("%s machine: unknown state %q", e.Machine, e.State)
}
