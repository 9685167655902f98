package transport

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: every
// reader, writer, dispatcher and driver must stop with its connection.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
