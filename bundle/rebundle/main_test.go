package rebundle_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/bundle/rebundle"
	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestMain(m *testing.M) {
	trace := fsmtest.StartTrace(fsmtest.Checks{Cover: []fsmtest.Coverage{fsmtest.Cover(rebundle.Table)}})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}
