package trust

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (terminal reads, waiting connections)
// must be gone when it ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
