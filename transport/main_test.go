package transport

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/internal/fsmkit/fsmtest"
)

// TestMain fails the run if any test leaves a goroutine behind: every
// reader, writer, dispatcher and driver must stop with its connection.
func TestMain(m *testing.M) {
	// The Redialer drives ConnectionTable (the fleet drives it too, and
	// checks its own coverage).
	trace := fsmtest.StartTrace(fsmtest.Checks{Cover: []fsmtest.Coverage{fsmtest.Cover(ConnectionTable)}})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}
