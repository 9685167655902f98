package pirpc

import (
	"testing"

	"go.uber.org/goleak"
)

// Every Client goroutine (reader, pump, barrier writers, wait timers) must
// be gone once its stream has ended.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
