package fsmkit

import (
	"cmp"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The trace is how a test suite proves that its drivers fire every edge of
// their tables and drop no event silently (see fsmtest.Main). It is off
// unless a test binary turns it on; off, it costs Fire one atomic load.
//
// While it is on, every Machine of the process records, per table, which
// edges a driver fired, and, process-wide, every stale event a driver
// fired. Only drivers count: a Fire called directly from a _test.go file
// (a walk through a table, an example) or from package fsmtest (the
// matrix) records nothing, since it proves nothing about the driver.
var tracing atomic.Bool

// EnableTrace turns the trace on for the rest of the process. Test
// binaries call it (through fsmtest.Main) before running their tests.
func EnableTrace() { tracing.Store(true) }

// TraceEnabled reports whether EnableTrace was called.
func TraceEnabled() bool { return tracing.Load() }

// FiredEdges returns the table's edges (one per event and source state,
// labelled with the event) that a driver fired since EnableTrace, in
// declaration order.
func (t *Table[S, E]) FiredEdges() []Edge { return t.tracedEdges(true) }

// UnfiredEdges returns the table's edges that no driver fired since
// EnableTrace, in declaration order.
func (t *Table[S, E]) UnfiredEdges() []Edge { return t.tracedEdges(false) }

func (t *Table[S, E]) tracedEdges(fired bool) []Edge {
	var out []Edge
	for i, e := range t.edges {
		if t.fired[i].Load() == fired {
			out = append(out, e)
		}
	}
	return out
}

// StaleRecord is one kind of stale event a driver fired while the trace
// was on: the machine, the state that refused the event, the event, how
// often, and where the first one was fired from (file:line function).
type StaleRecord struct {
	Machine, State, Event string
	Count                 int
	Site                  string
}

func (r StaleRecord) String() string {
	return fmt.Sprintf("%s: %s in state %s (%d×, first from %s)", r.Machine, r.Event, r.State, r.Count, r.Site)
}

type staleKey struct{ machine, state, event string }

var stale struct {
	mu   sync.Mutex
	seen map[staleKey]*StaleRecord
}

// StaleEvents returns the stale events that drivers fired since
// EnableTrace, sorted by machine, event and state.
func StaleEvents() []StaleRecord {
	stale.mu.Lock()
	defer stale.mu.Unlock()
	out := make([]StaleRecord, 0, len(stale.seen))
	for _, r := range stale.seen {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b StaleRecord) int {
		return cmp.Or(cmp.Compare(a.Machine, b.Machine), cmp.Compare(a.Event, b.Event), cmp.Compare(a.State, b.State))
	})
	return out
}

func traceStale(machine, state, event string) {
	site, driver := caller()
	if !driver {
		return
	}
	k := staleKey{machine, state, event}
	stale.mu.Lock()
	defer stale.mu.Unlock()
	if stale.seen == nil {
		stale.seen = map[staleKey]*StaleRecord{}
	}
	if r := stale.seen[k]; r != nil {
		r.Count++
		return
	}
	stale.seen[k] = &StaleRecord{Machine: machine, State: state, Event: event, Count: 1, Site: site}
}

func firedByDriver() bool {
	_, driver := caller()
	return driver
}

// kitPrefix and testPrefix are the function-name prefixes of this package
// and of fsmtest, worked out once from a function of each.
var kitPrefix, testPrefix = func() (string, string) {
	name := runtime.FuncForPC(reflect.ValueOf(EnableTrace).Pointer()).Name()
	pkg := name[:strings.LastIndexByte(name, '.')]
	return pkg + ".", pkg + "/fsmtest."
}()

// caller finds the first frame outside this package, the code that fired
// the event, and reports whether it is a driver: not a _test.go file and
// not fsmtest. It is called only for an edge not yet recorded and for
// stale events, so its cost does not matter.
func caller() (site string, driver bool) {
	var pcs [16]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, kitPrefix) {
			site = fmt.Sprintf("%s:%d %s", f.File, f.Line, f.Function)
			return site, !strings.HasSuffix(f.File, "_test.go") && !strings.HasPrefix(f.Function, testPrefix)
		}
		if !more {
			return "", false
		}
	}
}
