package fleet

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/fsmkit/fsmtest"
)

func TestInstanceTableMatrix(t *testing.T) {
	// Written from seed §1/§7 and the documented additions, state by state,
	// not from the table.
	fsmtest.Matrix(t, InstanceTable, map[InstanceState]map[InstanceEvent]InstanceState{
		StateRequested: {
			EventSpawnAccepted: StateSpawning,
			EventSpawnError:    StateFailed,
			EventStopRequested: StateStopping,
		},
		StateSpawning: {
			EventProvisioningStarted: StateProvisioning,
			EventSpawnError:          StateFailed,
			EventStopRequested:       StateStopping,
		},
		StateProvisioning: {
			EventSpawned:       StateIdle,
			EventCacheDegraded: StateDegradedCache,
			EventSpawnError:    StateFailed,
			EventStopRequested: StateStopping,
		},
		StateDegradedCache: {
			EventSpawned:       StateIdle,
			EventSpawnError:    StateFailed,
			EventStopRequested: StateStopping,
		},
		StateIdle: {
			EventPromptDelivered: StateRunning,
			EventTaskDone:        StateAwaitingReview,
			EventStopRequested:   StateStopping,
			EventConnectionLost:  StateUnreachable,
			EventWorkerGone:      StateStopped,
		},
		StateRunning: {
			EventTaskDone:         StateAwaitingReview,
			EventSettledUntracked: StateIdle,
			EventAbortRequested:   StateAborting,
			EventStopRequested:    StateStopping,
			EventConnectionLost:   StateUnreachable,
			EventWorkerGone:       StateStopped,
		},
		StateAwaitingReview: {
			EventReviewStarted: StateVerifying,
			EventStopRequested: StateStopping,
			EventWorkerGone:    StateStopped,
		},
		StateVerifying: {
			EventTaskAccepted:       StateAccepted,
			EventTaskRejected:       StateRevising,
			EventMaxRejectsExceeded: StateEscalated,
			EventStopRequested:      StateStopping,
			EventWorkerGone:         StateStopped,
		},
		StateAccepted: {
			EventKeptIdle:      StateIdle,
			EventStopRequested: StateStopping,
		},
		StateRevising: {
			EventFeedbackDelivered: StateRunning,
			EventStopRequested:     StateStopping,
			EventWorkerGone:        StateStopped,
		},
		StateEscalated: {
			EventHumanDecided:  StateVerifying,
			EventStopRequested: StateStopping,
			EventWorkerGone:    StateStopped,
		},
		StateAborting: {
			EventAbortConfirmed: StateIdle,
			EventAbortTimedOut:  StateRunning,
			EventStopRequested:  StateStopping,
			EventWorkerGone:     StateStopped,
		},
		StateStopping: {
			EventStoppedGracefully: StateStopped,
			EventStoppedForced:     StateStopped,
			EventWorkerGone:        StateStopped,
		},
		StateUnreachable: {
			EventReconnectedIdle:    StateIdle,
			EventReconnectedRunning: StateRunning,
			EventWorkerGone:         StateStopped,
			EventTaskDone:           StateAwaitingReview,
		},
		StateStopped: {},
		StateFailed:  {},
	})
}

func TestInstanceTableReachable(t *testing.T) {
	fsmtest.Reachable(t, InstanceTable)
}

func TestInstanceTableHasTheSeedsStateNames(t *testing.T) {
	want := map[InstanceState]bool{
		"requested": true, "spawning": true, "provisioning": true, "degraded_cache": true,
		"idle": true, "running": true, "awaiting_review": true, "verifying": true,
		"accepted": true, "revising": true, "escalated": true, "aborting": true,
		"stopping": true, "stopped": true, "failed": true, "unreachable": true,
	}
	got := InstanceTable.States()
	if len(got) != len(want) {
		t.Errorf("table has %d states, the seed %d: %v", len(got), len(want), got)
	}
	for _, s := range got {
		if !want[s] {
			t.Errorf("state %q is not one of the seed's", s)
		}
	}
	if InstanceTable.Name() != "instance" || InstanceTable.Initial() != StateRequested {
		t.Errorf("name %q, initial %q", InstanceTable.Name(), InstanceTable.Initial())
	}
}

func TestInstanceTableMatchesSeed(t *testing.T) {
	seed := fsmtest.SeedEdges(t, "../docs/seeds/state-flow.md", "## 1. Worker instance lifecycle")
	fsmtest.MatchSeed(t, InstanceTable, seed, []fsmkit.Edge{
		// The agent can refuse after accepting, before provisioning starts
		// (e.g. the machine filled up, or the cwd vanished).
		fsmtest.Edge("spawning", "failed", "spawnError"),
		// Provisioning happens before exec: after a degraded sync, pi can
		// still fail to start or die before its first get_state.
		fsmtest.Edge("degraded_cache", "failed", "spawnError"),
		// A durable task_done can trail the reconnect snapshot that already
		// showed the worker settled; it must still start the review.
		fsmtest.Edge("idle", "awaiting_review", "taskDone"),
		// The agent replays its outbox before answering list, so a
		// task_done for a run that finished during the outage arrives while
		// the instance is still unreachable.
		fsmtest.Edge("unreachable", "awaiting_review", "taskDone"),
		// A worker under review is alive and holds context; the application
		// (or a human, or a shutdown) may stop it without a verdict.
		fsmtest.Edge("awaiting_review", "stopping", "stopRequested"),
		fsmtest.Edge("verifying", "stopping", "stopRequested"),
		fsmtest.Edge("escalated", "stopping", "stopRequested"),
		// A rejection restored from an older server's record waits in
		// revising for the reconnect to deliver it; the user may stop the
		// worker meanwhile instead.
		fsmtest.Edge("revising", "stopping", "stopRequested"),
		// Workers crash, are killed, or are lost with a restarting agent,
		// in every state where one lives; the seed only covers this after
		// a reconnect. A stop re-sent after a reconnect can also find the
		// worker already gone (unknown_instance).
		fsmtest.Edge("idle", "stopped", "workerGone"),
		fsmtest.Edge("running", "stopped", "workerGone"),
		fsmtest.Edge("aborting", "stopped", "workerGone"),
		fsmtest.Edge("stopping", "stopped", "workerGone"),
		fsmtest.Edge("awaiting_review", "stopped", "workerGone"),
		fsmtest.Edge("verifying", "stopped", "workerGone"),
		fsmtest.Edge("escalated", "stopped", "workerGone"),
		fsmtest.Edge("revising", "stopped", "workerGone"),
		// Stopping always works: an abort that does not end the run (an
		// extension command waiting on a dialog, a worker deaf to abort)
		// must not leave the worker unstoppable; the agent aborts, closes
		// and kills.
		fsmtest.Edge("aborting", "stopping", "stopRequested"),
		// A user can stop a worker at any moment: during its spawn (the
		// agent gives the spawn up, or the worker is stopped once up).
		fsmtest.Edge("requested", "stopping", "stopRequested"),
		fsmtest.Edge("spawning", "stopping", "stopRequested"),
		fsmtest.Edge("provisioning", "stopping", "stopRequested"),
		fsmtest.Edge("degraded_cache", "stopping", "stopRequested"),
		// aborting has its own deadline: an abort not confirmed in time did
		// not take, and the run goes on.
		fsmtest.Edge("aborting", "running", "abortTimedOut"),
	})
}

func TestInstanceTableGolden(t *testing.T) {
	fsmtest.Golden(t, InstanceTable, "testdata/instance.mmd")
}

// TestReviewCycleWalk drives one task through the whole §7 cycle with the
// default maxRejects: three revisions, the fourth rejection escalates, a
// human asks for one more revision, and the application's next rejection
// escalates again before a human accepts.
func TestReviewCycleWalk(t *testing.T) {
	m := InstanceTable.Start()
	fire := func(ev InstanceEvent, want InstanceState) {
		t.Helper()
		if err := m.Fire(ev); err != nil {
			t.Fatal(err)
		}
		if m.State() != want {
			t.Fatalf("after %s: %s, want %s", ev, m.State(), want)
		}
	}
	fire(EventSpawnAccepted, StateSpawning)
	fire(EventProvisioningStarted, StateProvisioning)
	fire(EventSpawned, StateIdle)
	fire(EventPromptDelivered, StateRunning)

	maxRejects, err := ResolveMaxRejects(nil)
	if err != nil {
		t.Fatal(err)
	}
	rejects := 0
	reject := func(want InstanceState) {
		t.Helper()
		fire(RejectionEvent(rejects, maxRejects), want)
		rejects++
	}
	for range 3 {
		fire(EventTaskDone, StateAwaitingReview)
		fire(EventReviewStarted, StateVerifying)
		reject(StateRevising)
		fire(EventFeedbackDelivered, StateRunning)
	}
	fire(EventTaskDone, StateAwaitingReview)
	fire(EventReviewStarted, StateVerifying)
	reject(StateEscalated)

	// The human rejects: delivered whatever the count.
	fire(EventHumanDecided, StateVerifying)
	fire(EventTaskRejected, StateRevising)
	rejects++
	fire(EventFeedbackDelivered, StateRunning)
	fire(EventTaskDone, StateAwaitingReview)
	fire(EventReviewStarted, StateVerifying)
	reject(StateEscalated)

	fire(EventHumanDecided, StateVerifying)
	fire(EventTaskAccepted, StateAccepted)
	fire(EventStopRequested, StateStopping)
	fire(EventStoppedGracefully, StateStopped)
	if rejects != 6 {
		t.Errorf("rejects counted %d, want 6", rejects)
	}
	if err := m.Fire(EventPromptDelivered); !errors.Is(err, fsmkit.ErrStaleEvent) {
		t.Errorf("a prompt to a stopped worker: %v, want a stale event", err)
	}
}

func TestRejectionEventOffByOne(t *testing.T) {
	cases := []struct {
		rejectsSoFar, maxRejects int
		want                     InstanceEvent
	}{
		// maxRejects 3: rejections number 1, 2 and 3 are revised; number 4
		// is "more than 3" and escalates; later ones escalate too.
		{0, 3, EventTaskRejected},
		{1, 3, EventTaskRejected},
		{2, 3, EventTaskRejected},
		{3, 3, EventMaxRejectsExceeded},
		{4, 3, EventMaxRejectsExceeded},
		// maxRejects 0: the first rejection already escalates.
		{0, 0, EventMaxRejectsExceeded},
		// maxRejects 1: one revision, the second rejection escalates.
		{0, 1, EventTaskRejected},
		{1, 1, EventMaxRejectsExceeded},
		// Negative inputs count as 0.
		{-5, 1, EventTaskRejected},
		{-1, -1, EventMaxRejectsExceeded},
		// No overflow at the extremes.
		{math.MaxInt, math.MaxInt, EventMaxRejectsExceeded},
		{math.MaxInt - 1, math.MaxInt, EventTaskRejected},
	}
	for _, c := range cases {
		if got := RejectionEvent(c.rejectsSoFar, c.maxRejects); got != c.want {
			t.Errorf("RejectionEvent(%d, %d) = %s, want %s", c.rejectsSoFar, c.maxRejects, got, c.want)
		}
	}
}

func TestResolveMaxRejects(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	good := []struct {
		in   *float64
		want int
	}{
		{nil, DefaultMaxRejects},
		{f(0), 0},
		{f(2), 2},
		{f(MaxMaxRejects), MaxMaxRejects},
	}
	for _, c := range good {
		got, err := ResolveMaxRejects(c.in)
		if err != nil || got != c.want {
			t.Errorf("ResolveMaxRejects(%v) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []float64{-1, 2.5, MaxMaxRejects + 1, math.NaN(), math.Inf(1)} {
		_, err := ResolveMaxRejects(&bad)
		var mre *MaxRejectsError
		if !errors.As(err, &mre) {
			t.Errorf("ResolveMaxRejects(%v): %v, want a *MaxRejectsError", bad, err)
		}
	}
}

// ExampleRejectionEvent shows the off-by-one of "more than maxRejects
// rejections → escalated" with the default maxRejects.
func ExampleRejectionEvent() {
	maxRejects, _ := ResolveMaxRejects(nil) // the manifest says nothing
	for rejects := range 5 {
		fmt.Printf("rejection %d: %s\n", rejects+1, RejectionEvent(rejects, maxRejects))
	}
	// Output:
	// rejection 1: taskRejected
	// rejection 2: taskRejected
	// rejection 3: taskRejected
	// rejection 4: maxRejectsExceeded
	// rejection 5: maxRejectsExceeded
}

// ExampleInstanceTable follows a worker from spawn to its first review.
func ExampleInstanceTable() {
	m := InstanceTable.Start()
	for _, ev := range []InstanceEvent{
		EventSpawnAccepted, EventProvisioningStarted, EventCacheDegraded, EventSpawned,
		EventPromptDelivered, EventTaskDone, EventReviewStarted,
	} {
		if err := m.Fire(ev); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s → %s\n", ev, m.State())
	}
	fmt.Println(m.Fire(EventSpawned))
	// Output:
	// spawnAccepted → spawning
	// provisioningStarted → provisioning
	// cacheDegraded → degraded_cache
	// spawned → idle
	// promptDelivered → running
	// taskDone → awaiting_review
	// reviewStarted → verifying
	// instance machine: event spawned is not valid in state verifying
}

func TestTaskTableMatrix(t *testing.T) {
	// Written from the review cycle (seed §7) and the task's own ends,
	// state by state, not from the table.
	open := func(extra map[TaskEvent]TaskState) map[TaskEvent]TaskState {
		extra[TaskEventStopped] = TaskStopped
		extra[TaskEventWorkerGone] = TaskAborted
		return extra
	}
	fsmtest.Matrix(t, TaskTable, map[TaskState]map[TaskEvent]TaskState{
		TaskRunning: open(map[TaskEvent]TaskState{
			TaskEventDone:       TaskAwaitingReview,
			TaskEventAborted:    TaskAborted,
			TaskEventPromptLost: TaskFailed,
		}),
		TaskAwaitingReview: open(map[TaskEvent]TaskState{TaskEventReviewStarted: TaskVerifying}),
		TaskVerifying: open(map[TaskEvent]TaskState{
			TaskEventAccepted:           TaskAccepted,
			TaskEventRejected:           TaskRevising,
			TaskEventMaxRejectsExceeded: TaskEscalated,
		}),
		// accepted lasts one step: the disposition follows under the same
		// lock, so nothing else can reach it.
		TaskAccepted:  {TaskEventDispositionDone: TaskEnded},
		TaskRevising:  open(map[TaskEvent]TaskState{TaskEventFeedbackDelivered: TaskRunning}),
		TaskEscalated: open(map[TaskEvent]TaskState{TaskEventHumanDecided: TaskVerifying}),
		TaskEnded:     {},
		TaskAborted:   {},
		TaskStopped:   {},
		TaskFailed:    {},
	})
}

func TestTaskTableReachable(t *testing.T) {
	fsmtest.Reachable(t, TaskTable)
}

func TestTaskTableGolden(t *testing.T) {
	fsmtest.Golden(t, TaskTable, "testdata/task.mmd")
}

// TestTaskStatesAreStoredNames: the task's states are stored in the
// server's state file and shown to users; they are the instance's review
// state names, plus the task's own ends.
func TestTaskStatesAreStoredNames(t *testing.T) {
	for _, s := range []TaskState{TaskRunning, TaskAwaitingReview, TaskVerifying, TaskAccepted, TaskRevising, TaskEscalated} {
		if _, err := InstanceTable.Restore(InstanceState(s)); err != nil {
			t.Errorf("task state %q is not an instance state of the same name: %v", s, err)
		}
	}
	if got := len(TaskTable.States()); got != 10 {
		t.Errorf("%d task states, want 10: %v", got, TaskTable.States())
	}
}

func TestTaskRejectionEventFollowsRejectionEvent(t *testing.T) {
	for so := range 5 {
		for mr := range 4 {
			want := TaskEventRejected
			if RejectionEvent(so, mr) == EventMaxRejectsExceeded {
				want = TaskEventMaxRejectsExceeded
			}
			if got := TaskRejectionEvent(so, mr); got != want {
				t.Errorf("TaskRejectionEvent(%d, %d) = %s, want %s", so, mr, got, want)
			}
		}
	}
}
