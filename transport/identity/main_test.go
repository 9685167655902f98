package identity

import (
	"testing"

	"go.uber.org/goleak"
)

// No exec goroutine outlives its CLI call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
