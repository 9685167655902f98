package fsmtest

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"example.com/pifleet/internal/fsmkit"
)

// Trace checks, after a package's tests ran, what the drivers of its state
// machines did (fsmkit's trace):
//
//   - no silent drops: a driver that fired an event its machine's state
//     refused fails the run, unless the event is late network input (the
//     project's one list, LateInput), or a refusal that the package's own
//     tests provoke on purpose (Checks.Provoked);
//   - every edge is real: each table in Checks.Cover must have had every
//     edge fired by its driver (not by a matrix or a walk in a test file),
//     except the ones listed as known to be unfired. This is checked only
//     when the whole suite ran: not under -run, -skip, -short, -list or
//     -fuzz, which run a part of it on purpose, and not when a test failed
//     already.
//
// A package's TestMain starts it before m.Run and checks it after:
//
//	func TestMain(m *testing.M) {
//		trace := fsmtest.StartTrace(fsmtest.Checks{Cover: []fsmtest.Coverage{fsmtest.Cover(Table)}})
//		os.Exit(trace.Check(m.Run()))
//	}
type Trace struct {
	checks Checks
	out    io.Writer
}

// Checks is what a Trace verifies.
type Checks struct {
	// Cover lists the tables whose every edge this package's suite drives.
	// A table driven in several packages is covered in one of them, the
	// one whose suite drives it whole; the others only get the stale
	// check.
	Cover []Coverage
	// Provoked lists the stale events that the package's own tests feed
	// its driver on purpose, to check that it refuses them. Each reason
	// names the test.
	Provoked []Late
}

// Coverage is one table that a suite must drive whole; see Cover.
type Coverage struct {
	name    string
	fired   func() []fsmkit.Edge
	unfired func() []fsmkit.Edge
	known   []Unfired
}

// Unfired is an edge known to be fired by no test yet, with the reason.
// The list shrinks: an edge that a test does fire is reported, so that it
// is taken off.
type Unfired struct {
	Src, Event, Dst string
	Reason          string
}

// Late is a stale event that a driver may refuse without failing the
// run: machine and event, and the state that refuses it ("" for any
// state), with the reason.
type Late struct {
	Machine, Event, State string
	Reason                string
}

// Cover declares that the suite must fire every edge of table, but for
// the known ones listed.
func Cover[S, E ~string](table *fsmkit.Table[S, E], known ...Unfired) Coverage {
	return Coverage{name: table.Name(), fired: table.FiredEdges, unfired: table.UnfiredEdges, known: known}
}

// StartTrace turns fsmkit's trace on (for the rest of the process) and
// returns the check to run once the tests ran.
func StartTrace(c Checks) *Trace {
	fsmkit.EnableTrace()
	return &Trace{checks: c, out: os.Stderr}
}

// Check reports what the trace found on standard error and returns the
// exit code: code (m.Run's) when it is not 0 or nothing failed, else 1.
func (tr *Trace) Check(code int) int {
	failed := false
	for _, r := range fsmkit.StaleEvents() {
		if tr.late(r) {
			continue
		}
		failed = true
		fmt.Fprintf(tr.out, "fsmtest: a driver dropped an event its machine refused: %s\n", r)
	}
	whole, why := wholeSuite()
	switch {
	case !whole:
		if testing.Verbose() {
			fmt.Fprintf(tr.out, "fsmtest: edge coverage not checked: %s\n", why)
		}
	case code != 0:
		// A failed test may not have reached its edges: say nothing more.
	default:
		for _, c := range tr.checks.Cover {
			if tr.coverage(c) {
				failed = true
			}
		}
	}
	if failed && code == 0 {
		return 1
	}
	return code
}

// coverage reports c's unfired edges and known-unfired edges that fire
// now; it returns whether any edge is unfired and not known.
func (tr *Trace) coverage(c Coverage) bool {
	isKnown := func(e fsmkit.Edge) bool {
		return slices.ContainsFunc(c.known, func(u Unfired) bool {
			return u.Src == e.Src && u.Event == e.Label && u.Dst == e.Dst
		})
	}
	failed := false
	for _, e := range c.unfired() {
		if !isKnown(e) {
			failed = true
			fmt.Fprintf(tr.out, "fsmtest: %s edge %s --%s--> %s is never fired by its driver in this suite\n", c.name, e.Src, e.Label, e.Dst)
		}
	}
	fired := c.fired()
	for _, e := range fired {
		if isKnown(e) {
			fmt.Fprintf(tr.out, "fsmtest: %s edge %s --%s--> %s is fired now: take it off the known-unfired list\n", c.name, e.Src, e.Label, e.Dst)
		}
	}
	all := append(fired, c.unfired()...)
	for _, u := range c.known {
		if !slices.ContainsFunc(all, func(e fsmkit.Edge) bool { return u.Src == e.Src && u.Event == e.Label && u.Dst == e.Dst }) {
			failed = true
			fmt.Fprintf(tr.out, "fsmtest: %s has no edge %s --%s--> %s: take it off the known-unfired list\n", c.name, u.Src, u.Event, u.Dst)
		}
	}
	return failed
}

func (tr *Trace) late(r fsmkit.StaleRecord) bool {
	match := func(l Late) bool {
		return l.Machine == r.Machine && l.Event == r.Event && (l.State == "" || l.State == r.State)
	}
	return slices.ContainsFunc(LateInput, match) || slices.ContainsFunc(tr.checks.Provoked, match)
}

// wholeSuite reports whether the test binary ran every test of its
// package, and if not, why. It reads the testing flags, so it must run
// after m.Run parsed them.
func wholeSuite() (bool, string) {
	if testing.Short() {
		return false, "-short"
	}
	for _, name := range []string{"test.run", "test.skip", "test.list", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false, "-" + strings.TrimPrefix(name, "test.") + " " + f.Value.String()
		}
	}
	return true, ""
}
