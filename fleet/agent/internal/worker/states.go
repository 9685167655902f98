package worker

import "example.com/pifleet/internal/fsmkit"

// LifecycleEvent moves a worker process between States.
//
// The seeds have no agent-side machine (seed §1 is the server's view of an
// instance); this one is the process lifecycle behind Snapshot.State, and
// its state names are the ones the daemon reports. Each outcome of one
// trigger is its own event, so the diagram shows every edge.
type LifecycleEvent string

// Worker lifecycle events.
const (
	// OnReady: the first get_state was answered.
	OnReady LifecycleEvent = "ready"
	// OnRunStarted: agent_start of a new run (or Adopt found one running).
	OnRunStarted LifecycleEvent = "runStarted"
	// OnRunSettled: the run settled.
	OnRunSettled LifecycleEvent = "runSettled"
	// OnStop: Stop (or Restart) began.
	OnStop LifecycleEvent = "stop"
	// OnExited: the process ended on its own (crash, exit, startup failure).
	OnExited LifecycleEvent = "exited"
	// OnStoppedExit: the process ended after Stop.
	OnStoppedExit LifecycleEvent = "stoppedExit"
	// OnRestartExit: the process ended for a Restart, or the restarted one
	// died before it was ready; the next one starts (the previous spec,
	// after a start that failed).
	OnRestartExit LifecycleEvent = "restartExit"
	// OnShimLost: the shim vanished without reporting an exit.
	OnShimLost LifecycleEvent = "shimLost"
)

// WorkerTable is the worker process lifecycle as a table.
var WorkerTable = fsmkit.MustTable(fsmkit.Spec[State, LifecycleEvent]{
	Name:    "worker",
	Initial: StateStarting,
	Final:   []State{StateStopped, StateExited, StateLost},
	Transitions: []fsmkit.Transition[State, LifecycleEvent]{
		{Event: OnReady, Src: []State{StateStarting}, Dst: StateIdle},
		{Event: OnRunStarted, Src: []State{StateIdle}, Dst: StateRunning},
		{Event: OnRunSettled, Src: []State{StateRunning}, Dst: StateIdle},
		// While stopping, the aborted run still starts and settles.
		{Event: OnRunStarted, Src: []State{StateStopping}, Dst: StateStopping},
		{Event: OnRunSettled, Src: []State{StateStopping}, Dst: StateStopping},
		{Event: OnStop, Src: []State{StateIdle, StateRunning}, Dst: StateStopping},
		{Event: OnExited, Src: []State{StateStarting, StateIdle, StateRunning}, Dst: StateExited},
		{Event: OnStoppedExit, Src: []State{StateStopping}, Dst: StateStopped},
		{Event: OnRestartExit, Src: []State{StateStopping, StateStarting}, Dst: StateStarting},
		{Event: OnShimLost, Src: []State{StateStarting, StateIdle, StateRunning, StateStopping}, Dst: StateLost},
	},
})
