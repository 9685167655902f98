package controlapi

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/internal/fsmkit/fsmtest"
)

// TestMain fails the run when a test leaves a goroutine behind or a state
// machine driver drops an event silently.
func TestMain(m *testing.M) {
	trace := fsmtest.StartTrace(fsmtest.Checks{})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}
