package serverstore

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the crash test's child when asked to (see crash_test.go),
// and otherwise the tests, checking that none leaks a goroutine.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}
