package worker

import (
	"testing"

	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestWorkerTableMatrix(t *testing.T) {
	// Written from the lifecycle the package documents, not from the table.
	fsmtest.Matrix(t, WorkerTable, map[State]map[LifecycleEvent]State{
		StateStarting: {
			OnReady:       StateIdle,
			OnExited:      StateExited,
			OnShimLost:    StateLost,
			OnRestartExit: StateStarting,
		},
		StateIdle: {
			OnRunStarted: StateRunning,
			OnStop:       StateStopping,
			OnExited:     StateExited,
			OnShimLost:   StateLost,
		},
		StateRunning: {
			OnRunSettled: StateIdle,
			OnStop:       StateStopping,
			OnExited:     StateExited,
			OnShimLost:   StateLost,
		},
		StateStopping: {
			OnRunStarted:  StateStopping,
			OnRunSettled:  StateStopping,
			OnStoppedExit: StateStopped,
			OnRestartExit: StateStarting,
			OnShimLost:    StateLost,
		},
		StateStopped: {},
		StateExited:  {},
		StateLost:    {},
	})
}

func TestWorkerTableReachable(t *testing.T) {
	fsmtest.Reachable(t, WorkerTable)
}

func TestWorkerTableGolden(t *testing.T) {
	fsmtest.Golden(t, WorkerTable, "testdata/worker.mmd")
}
