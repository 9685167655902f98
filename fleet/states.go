package fleet

import (
	"fmt"
	"math"

	"example.com/pifleet/internal/fsmkit"
)

// InstanceState is where one worker instance stands, as the server tracks
// it.
type InstanceState string

// InstanceEvent moves an instance between InstanceStates.
type InstanceEvent string

// The states of a worker instance.
const (
	// StateRequested: the spawn frame is sent; the agent has not answered.
	StateRequested InstanceState = "requested"
	// StateSpawning: the agent accepted the spawn (spawn_progress
	// accepted) and prepares it.
	StateSpawning InstanceState = "spawning"
	// StateProvisioning: the agent syncs the bundle into its cache, then
	// starts pi with the bundle's resources and waits for pi's first
	// get_state answer.
	StateProvisioning InstanceState = "provisioning"
	// StateDegradedCache: the registry was unreachable and the agent goes
	// on with the cached bundle; it still has to start pi.
	StateDegradedCache InstanceState = "degraded_cache"
	// StateIdle: the worker is up and settled; it can be prompted.
	StateIdle InstanceState = "idle"
	// StateRunning: a prompt (tracked or not) is in flight.
	StateRunning InstanceState = "running"
	// StateAwaitingReview: a tracked task finished (task_done received);
	// the worker stays alive with its context, waiting for the review.
	StateAwaitingReview InstanceState = "awaiting_review"
	// StateVerifying: the application is reviewing the task. It may
	// prompt the worker for evidence meanwhile (see the driving rules).
	StateVerifying InstanceState = "verifying"
	// StateAccepted: the task was accepted; the disposition (keep idle or
	// stop) follows at once.
	StateAccepted InstanceState = "accepted"
	// StateRevising: the task was rejected; the feedback is to be
	// delivered to the same session as a new prompt.
	StateRevising InstanceState = "revising"
	// StateEscalated: the task was rejected more than maxRejects times;
	// a human decides.
	StateEscalated InstanceState = "escalated"
	// StateAborting: an abort of the current run was sent.
	StateAborting InstanceState = "aborting"
	// StateStopping: a stop was sent.
	StateStopping InstanceState = "stopping"
	// StateStopped: the worker no longer runs (final).
	StateStopped InstanceState = "stopped"
	// StateFailed: the spawn failed; no worker ever ran (final).
	StateFailed InstanceState = "failed"
	// StateUnreachable: the agent's connection is lost. A server-side
	// view state: the worker keeps running under its agent.
	StateUnreachable InstanceState = "unreachable"
)

// Instance events. Each outcome of one trigger is its own event, so the
// diagram shows every edge. Which frame or SDK call fires which event is
// listed on InstanceTable.
const (
	// EventSpawnAccepted: the agent accepted the spawn
	// (spawn_progress accepted).
	EventSpawnAccepted InstanceEvent = "spawnAccepted"
	// EventSpawnError: the agent answered spawn_error, at any point before
	// spawned; or a reconnect showed that the spawn never completed.
	EventSpawnError InstanceEvent = "spawnError"
	// EventProvisioningStarted: the agent began syncing the bundle
	// (spawn_progress provisioning).
	EventProvisioningStarted InstanceEvent = "provisioningStarted"
	// EventCacheDegraded: the registry was unreachable and the cached
	// bundle is used (spawn_progress degraded).
	EventCacheDegraded InstanceEvent = "cacheDegraded"
	// EventSpawned: the worker answered its first get_state (spawned).
	EventSpawned InstanceEvent = "spawned"
	// EventPromptDelivered: a prompt (tracked or not) was written to the
	// agent connection.
	EventPromptDelivered InstanceEvent = "promptDelivered"
	// EventSettledUntracked: agent_settled for a run without a task.
	EventSettledUntracked InstanceEvent = "settledUntracked"
	// EventTaskDone: a new (not duplicate) task_done for the instance's
	// open task.
	EventTaskDone InstanceEvent = "taskDone"
	// EventReviewStarted: the application began reviewing the task.
	EventReviewStarted InstanceEvent = "reviewStarted"
	// EventTaskAccepted: the review accepted the task.
	EventTaskAccepted InstanceEvent = "taskAccepted"
	// EventTaskRejected: the review rejected the task and its rejections,
	// this one included, are at most maxRejects (see RejectionEvent).
	EventTaskRejected InstanceEvent = "taskRejected"
	// EventMaxRejectsExceeded: the review rejected the task once more than
	// maxRejects allows (see RejectionEvent).
	EventMaxRejectsExceeded InstanceEvent = "maxRejectsExceeded"
	// EventHumanDecided: a human gave the decision an escalated task
	// waits for.
	EventHumanDecided InstanceEvent = "humanDecided"
	// EventFeedbackDelivered: the rejection feedback was written to the
	// agent connection as a new tracked prompt in the same session.
	EventFeedbackDelivered InstanceEvent = "feedbackDelivered"
	// EventKeptIdle: an accepted task's disposition is keep_idle.
	EventKeptIdle InstanceEvent = "keptIdle"
	// EventStopRequested: a stop was sent (an SDK Stop, or an accepted
	// task's disposition stop).
	EventStopRequested InstanceEvent = "stopRequested"
	// EventAbortRequested: an abort of the current run was sent.
	EventAbortRequested InstanceEvent = "abortRequested"
	// EventAbortConfirmed: the aborted run settled.
	EventAbortConfirmed InstanceEvent = "abortConfirmed"
	// EventAbortTimedOut: the aborted run had not settled within
	// Config.AbortTimeout: the abort did not take and the run goes on.
	EventAbortTimedOut InstanceEvent = "abortTimedOut"
	// EventStoppedGracefully: the agent answered stopped {forced:false};
	// or, for an instance stopped during its spawn, spawn_error (the agent
	// gave the spawn up: no worker runs).
	EventStoppedGracefully InstanceEvent = "stoppedGracefully"
	// EventStoppedForced: the agent answered stopped {forced:true}: the
	// worker was killed after the grace period.
	EventStoppedForced InstanceEvent = "stoppedForced"
	// EventConnectionLost: the agent's connection was lost (heartbeat
	// expiry or socket close: the connection machine entered lost).
	EventConnectionLost InstanceEvent = "connectionLost"
	// EventReconnectedIdle: after a reconnect, the agent lists the worker
	// alive and its get_state shows it not streaming.
	EventReconnectedIdle InstanceEvent = "reconnectedIdle"
	// EventReconnectedRunning: after a reconnect, the agent lists the
	// worker alive and its get_state shows it streaming.
	EventReconnectedRunning InstanceEvent = "reconnectedRunning"
	// EventWorkerGone: the agent reports that the worker no longer runs
	// although nobody stopped it: an exit notice, or, after a reconnect, an
	// instance list that lacks it or shows it exited or lost.
	EventWorkerGone InstanceEvent = "workerGone"
)

// InstanceTable is the worker instance lifecycle, review cycle included,
// as a table (machine name "instance").
//
// # Driving rules
//
// One goroutine per agent (or per fleet) owns the instances' machines. It
// fires events as below and does the side effect (send a frame, persist,
// notify) only after Fire succeeded. An event the current state rejects is
// a stale input: log it and drop it. Frames from one agent are handled in
// the order they arrive.
//
// Spawn. Provisioning happens in the agent before it starts pi; the agent
// reports progress with spawn_progress frames, then spawned or
// spawn_error:
//
//	spawn_progress accepted      spawnAccepted        requested → spawning
//	spawn_progress provisioning  provisioningStarted  spawning → provisioning
//	spawn_progress degraded      cacheDegraded        provisioning → degraded_cache
//	spawned                      spawned              provisioning | degraded_cache → idle
//	spawn_error                  spawnError           requested | spawning | provisioning | degraded_cache → failed
//
// An agent that sends no progress (the TypeScript agent answers spawned
// at once) skipped steps: on spawned, fire the missing spawnAccepted and
// provisioningStarted first, then spawned. The degraded flag outlives
// degraded_cache: keep it on the instance record for status output.
//
// Prompts. promptDelivered fires from idle once the rpc frame with the
// prompt was written (tracked: with a taskId; untracked: without). From
// running, agent_settled fires settledUntracked only for an untracked run;
// a tracked run waits for its task_done. Steering a running worker fires
// nothing.
//
// Task completion. A task_done is first recorded durably (serverstore
// RecordTaskDone); only a new one (not a duplicate) is considered, and it
// fires taskDone only when its task is the instance's open task and that
// task is still running by the task record (not aborted or stopped by the
// application). taskDone is valid from running, and also from idle and
// unreachable, because the durable task_done can overtake or trail the
// reconnect snapshot (see Reconnect).
//
// Review. reviewStarted fires when the application starts its review:
// an explicit SDK call, or implicitly just before its first verdict from
// awaiting_review. A verdict from verifying:
//
//	accept                    taskAccepted, then at once keptIdle (keep_idle) or stopRequested (stop)
//	reject                    RejectionEvent(rejects so far, maxRejects): taskRejected or maxRejectsExceeded
//	feedback written          feedbackDelivered   revising → running (same taskId, same session)
//	human decision            humanDecided        escalated → verifying, then the human's verdict
//
// A human's reject is delivered whatever the count (fire taskRejected,
// not RejectionEvent); the count still grows, so the application's next
// rejection escalates again. Feedback is recorded durably before it is
// sent; if the connection is down, the instance stays in revising and the
// feedback is sent again after the reconnect. While the instance is in a
// review state the application may prompt the worker for evidence with
// untracked prompts; they move nothing (promptDelivered and
// settledUntracked are only valid from idle and running).
//
// Abort and stop. abortRequested / stopRequested fire once the abort or
// stop frame was written; an abort of a tracked task marks the task
// record aborted first, so that its task_done does not start a review.
// abortConfirmed fires on the first agent_settled after the abort;
// abortTimedOut when none came within Config.AbortTimeout (aborting has
// its own deadline: running again, the worker can be stopped). stop is
// accepted from every live state that is reachable, aborting included:
// the agent aborts the run first, then closes the worker's stdin, then
// kills it after its grace period (stopped {forced:true}). stopped
// {forced} fires stoppedGracefully or stoppedForced; an unknown_instance
// error in answer to stop fires workerGone.
//
// Stop during a spawn (requested, spawning, provisioning, degraded_cache;
// the instance goes by its spawn id until spawned) fires stopRequested and
// sends spawn_cancel to an agent that knows it; so does a Spawn whose
// context ends. The spawn's answer then ends the instance: spawn_error
// (spawn_cancelled, or any refusal) fires stoppedGracefully; spawned (the
// agent had started the worker, or knows no spawn_cancel) registers the
// worker and sends it a stop. A connection lost before the answer fires
// workerGone: the agent gives up a spawn with its connection.
//
// Worker exits. An agent's worker_exited notice fires workerGone (unless
// the instance is stopping: the stop's answer follows); its open task is
// marked aborted first, so that the task_done that follows opens no
// review of a dead worker.
//
// Connection loss and reconnect. connectionLost fires for every instance
// of the agent that is idle or running when the agent's connection enters
// lost (transport.StateLost); and right after a transition into idle or
// running while the connection is not established (a keep_idle accept
// during an outage), so that idle and running always mean reachable.
// Every other state keeps its meaning during an outage: spawn and review
// states are server-side bookkeeping, and the command of aborting,
// stopping or revising is sent again after the reconnect (stop is
// idempotent on the agent). After a reconnect the driver lists the
// agent's instances and asks each live worker for get_state, then fires
// for every instance of that agent:
//
//	listed alive, not streaming   reconnectedIdle (unreachable), abortConfirmed (aborting)
//	listed alive, streaming       reconnectedRunning (unreachable); aborting re-sends the abort
//	not listed, exited or lost    workerGone (spawn states: spawnError)
//	listed stopped                stoppedGracefully (stopping: the stop's answer was lost), else workerGone
//	still provisioning            nothing: progress frames follow
//
// A result the state rejects is stale and dropped: the review states, for
// example, only react to workerGone. Spawn states can only be reconciled
// this way when spawn_progress accepted names the new instance id.
//
// Stop during revising: a rejection is queued as soon as it is recorded,
// so a connected instance leaves revising at once; one restored from the
// record of an older server stays there, its feedback pending, until the
// reconnect's snapshot delivers it. A stop while the agent is connected
// and the feedback not yet delivered ends the task stopped; the feedback
// is never sent.
//
// Deliberately absent: prompts, aborts and stops while unreachable
// (nothing can be delivered: the SDK refuses them); connectionLost from
// any state but idle and running (see above).
var InstanceTable = fsmkit.MustTable(fsmkit.Spec[InstanceState, InstanceEvent]{
	Name:    "instance",
	Initial: StateRequested,
	Final:   []InstanceState{StateStopped, StateFailed},
	Transitions: []fsmkit.Transition[InstanceState, InstanceEvent]{
		// Spawn and provisioning.
		{Event: EventSpawnAccepted, Src: []InstanceState{StateRequested}, Dst: StateSpawning},
		{Event: EventProvisioningStarted, Src: []InstanceState{StateSpawning}, Dst: StateProvisioning},
		{Event: EventCacheDegraded, Src: []InstanceState{StateProvisioning}, Dst: StateDegradedCache},
		{Event: EventSpawned, Src: []InstanceState{StateProvisioning, StateDegradedCache}, Dst: StateIdle},
		{Event: EventSpawnError, Src: []InstanceState{StateRequested, StateSpawning, StateProvisioning, StateDegradedCache}, Dst: StateFailed},

		// Prompts and task completion.
		{Event: EventPromptDelivered, Src: []InstanceState{StateIdle}, Dst: StateRunning},
		{Event: EventSettledUntracked, Src: []InstanceState{StateRunning}, Dst: StateIdle},
		{Event: EventTaskDone, Src: []InstanceState{StateRunning, StateIdle, StateUnreachable}, Dst: StateAwaitingReview},

		// Review cycle (§7).
		{Event: EventReviewStarted, Src: []InstanceState{StateAwaitingReview}, Dst: StateVerifying},
		{Event: EventTaskAccepted, Src: []InstanceState{StateVerifying}, Dst: StateAccepted},
		{Event: EventTaskRejected, Src: []InstanceState{StateVerifying}, Dst: StateRevising},
		{Event: EventMaxRejectsExceeded, Src: []InstanceState{StateVerifying}, Dst: StateEscalated},
		{Event: EventHumanDecided, Src: []InstanceState{StateEscalated}, Dst: StateVerifying},
		{Event: EventFeedbackDelivered, Src: []InstanceState{StateRevising}, Dst: StateRunning},
		{Event: EventKeptIdle, Src: []InstanceState{StateAccepted}, Dst: StateIdle},

		// Abort and stop.
		{Event: EventAbortRequested, Src: []InstanceState{StateRunning}, Dst: StateAborting},
		{Event: EventAbortConfirmed, Src: []InstanceState{StateAborting}, Dst: StateIdle},
		{Event: EventAbortTimedOut, Src: []InstanceState{StateAborting}, Dst: StateRunning},
		{Event: EventStopRequested, Src: []InstanceState{
			StateRequested, StateSpawning, StateProvisioning, StateDegradedCache,
			StateIdle, StateRunning, StateAccepted, StateAborting,
			StateAwaitingReview, StateVerifying, StateEscalated, StateRevising,
		}, Dst: StateStopping},
		{Event: EventStoppedGracefully, Src: []InstanceState{StateStopping}, Dst: StateStopped},
		{Event: EventStoppedForced, Src: []InstanceState{StateStopping}, Dst: StateStopped},

		// Reachability and unexpected exits.
		{Event: EventConnectionLost, Src: []InstanceState{StateIdle, StateRunning}, Dst: StateUnreachable},
		{Event: EventReconnectedIdle, Src: []InstanceState{StateUnreachable}, Dst: StateIdle},
		{Event: EventReconnectedRunning, Src: []InstanceState{StateUnreachable}, Dst: StateRunning},
		{Event: EventWorkerGone, Src: []InstanceState{
			StateUnreachable,
			StateIdle, StateRunning, StateAborting, StateStopping,
			StateAwaitingReview, StateVerifying, StateEscalated, StateRevising,
		}, Dst: StateStopped},
	},
})

// DefaultMaxRejects is review.maxRejects when the bundle manifest does not
// set it.
const DefaultMaxRejects = 3

// MaxMaxRejects bounds review.maxRejects; a larger value is surely a
// mistake in the manifest.
const MaxMaxRejects = 1000

// MaxRejectsError reports a review.maxRejects that is not a whole number
// between 0 and MaxMaxRejects.
type MaxRejectsError struct {
	Value float64
}

func (e *MaxRejectsError) Error() string {
	return fmt.Sprintf("fleet: review.maxRejects must be a whole number from 0 to %d, not %v", MaxMaxRejects, e.Value)
}

// ResolveMaxRejects returns the maxRejects of a task from the bundle
// manifest's review.maxRejects (bundle.Review.MaxRejects): DefaultMaxRejects
// when it is absent (nil), else its value, which must be a whole number
// from 0 to MaxMaxRejects (a *MaxRejectsError otherwise). 0 means that the
// first rejection already escalates.
func ResolveMaxRejects(manifest *float64) (int, error) {
	if manifest == nil {
		return DefaultMaxRejects, nil
	}
	v := *manifest
	if math.IsNaN(v) || v != math.Trunc(v) || v < 0 || v > MaxMaxRejects {
		return 0, &MaxRejectsError{Value: v}
	}
	return int(v), nil
}

// RejectionEvent returns what the application's rejection of a task fires
// in verifying. "More than maxRejects rejections → escalated": with
// rejectsSoFar rejections before this one, this is rejection number
// rejectsSoFar+1; it is delivered as feedback (EventTaskRejected) while
// that number is at most maxRejects, and escalates
// (EventMaxRejectsExceeded) once it is larger. With the default 3, the
// first three rejections are revised and the fourth escalates. Every
// rejection counts, the escalating one included. Negative arguments count
// as 0.
func RejectionEvent(rejectsSoFar, maxRejects int) InstanceEvent {
	rejectsSoFar, maxRejects = max(rejectsSoFar, 0), max(maxRejects, 0)
	if rejectsSoFar >= maxRejects { // rejectsSoFar+1 > maxRejects, without overflow
		return EventMaxRejectsExceeded
	}
	return EventTaskRejected
}

// TaskState is where one tracked task stands in its review (TaskTable).
// Its values are stored in the server's state file: they never change.
type TaskState string

// TaskEvent moves a task between TaskStates.
type TaskEvent string

// The states of a tracked task.
const (
	// TaskRunning: the prompt (or the revision feedback) is with the
	// worker; its task_done has not come.
	TaskRunning TaskState = "running"
	// TaskAwaitingReview: the task_done came; the application has not
	// started its review.
	TaskAwaitingReview TaskState = "awaiting_review"
	// TaskVerifying: the application reviews the task.
	TaskVerifying TaskState = "verifying"
	// TaskAccepted: the review accepted the task; its disposition (keep
	// the worker idle, or stop it) follows at once.
	TaskAccepted TaskState = "accepted"
	// TaskRevising: the review rejected the task; the feedback is to be
	// delivered to the worker.
	TaskRevising TaskState = "revising"
	// TaskEscalated: rejected more often than review.maxRejects allows; a
	// human decides.
	TaskEscalated TaskState = "escalated"
	// TaskEnded: accepted and its disposition carried out (final).
	TaskEnded TaskState = "ended"
	// TaskAborted: aborted while it ran, or its worker died before a
	// verdict (final).
	TaskAborted TaskState = "aborted"
	// TaskStopped: its instance was stopped before a verdict (final).
	TaskStopped TaskState = "stopped"
	// TaskFailed: the prompt never reached the worker and cannot finish
	// any more: after a reconnect the worker was idle and the agent's
	// outbox, replayed by then, held no task_done for it (final).
	TaskFailed TaskState = "failed"
)

// Task events.
const (
	// TaskEventDone: a new task_done for the task while it runs.
	TaskEventDone TaskEvent = "taskDone"
	// TaskEventReviewStarted: the application began its review.
	TaskEventReviewStarted TaskEvent = "reviewStarted"
	// TaskEventAccepted: the review accepted the task.
	TaskEventAccepted TaskEvent = "accepted"
	// TaskEventRejected: the review rejected the task, within maxRejects
	// (or a human rejected it).
	TaskEventRejected TaskEvent = "rejected"
	// TaskEventMaxRejectsExceeded: the review rejected it once more than
	// maxRejects allows.
	TaskEventMaxRejectsExceeded TaskEvent = "maxRejectsExceeded"
	// TaskEventHumanDecided: a human took up the escalated task.
	TaskEventHumanDecided TaskEvent = "humanDecided"
	// TaskEventFeedbackDelivered: the rejection feedback was written to
	// the agent connection; the worker works on it.
	TaskEventFeedbackDelivered TaskEvent = "feedbackDelivered"
	// TaskEventDispositionDone: the accepted task's disposition was
	// carried out (keep_idle applied, or the stop sent).
	TaskEventDispositionDone TaskEvent = "dispositionDone"
	// TaskEventAborted: the application aborted the run.
	TaskEventAborted TaskEvent = "aborted"
	// TaskEventStopped: the application stopped the instance.
	TaskEventStopped TaskEvent = "stopped"
	// TaskEventWorkerGone: the worker ended by itself.
	TaskEventWorkerGone TaskEvent = "workerGone"
	// TaskEventPromptLost: reconcile showed a running task that can no
	// longer finish (see TaskFailed).
	TaskEventPromptLost TaskEvent = "promptLost"
)

// TaskTable is a tracked task's review cycle as a table (machine name
// "task"). It runs beside its instance's machine: the instance says where
// the worker is (idle, running, awaiting_review, …), the task says where
// its work is, and outlives the instance once final. The events fire
// with the instance events of the same step:
//
//	task_done (new, task running)     taskDone            with instance taskDone
//	review starts                     reviewStarted       with instance reviewStarted
//	accept                            accepted, then dispositionDone
//	reject within maxRejects          rejected            (TaskRejectionEvent)
//	reject beyond maxRejects          maxRejectsExceeded
//	human takes up the decision       humanDecided
//	feedback written                  feedbackDelivered   with instance feedbackDelivered
//	Abort                             aborted
//	Stop before a verdict             stopped
//	worker died                       workerGone          (its task_done, if any, opens no review)
//	reconcile: prompt lost            promptLost
//
// A task whose instance is already final takes no events: every event
// that finds the task in a final state is stale.
var TaskTable = fsmkit.MustTable(fsmkit.Spec[TaskState, TaskEvent]{
	Name:    "task",
	Initial: TaskRunning,
	Final:   []TaskState{TaskEnded, TaskAborted, TaskStopped, TaskFailed},
	Transitions: []fsmkit.Transition[TaskState, TaskEvent]{
		{Event: TaskEventDone, Src: []TaskState{TaskRunning}, Dst: TaskAwaitingReview},
		{Event: TaskEventReviewStarted, Src: []TaskState{TaskAwaitingReview}, Dst: TaskVerifying},
		{Event: TaskEventAccepted, Src: []TaskState{TaskVerifying}, Dst: TaskAccepted},
		{Event: TaskEventDispositionDone, Src: []TaskState{TaskAccepted}, Dst: TaskEnded},
		{Event: TaskEventRejected, Src: []TaskState{TaskVerifying}, Dst: TaskRevising},
		{Event: TaskEventMaxRejectsExceeded, Src: []TaskState{TaskVerifying}, Dst: TaskEscalated},
		{Event: TaskEventHumanDecided, Src: []TaskState{TaskEscalated}, Dst: TaskVerifying},
		{Event: TaskEventFeedbackDelivered, Src: []TaskState{TaskRevising}, Dst: TaskRunning},
		{Event: TaskEventAborted, Src: []TaskState{TaskRunning}, Dst: TaskAborted},
		{Event: TaskEventStopped, Src: []TaskState{
			TaskRunning, TaskAwaitingReview, TaskVerifying, TaskEscalated, TaskRevising,
		}, Dst: TaskStopped},
		{Event: TaskEventWorkerGone, Src: []TaskState{
			TaskRunning, TaskAwaitingReview, TaskVerifying, TaskEscalated, TaskRevising,
		}, Dst: TaskAborted},
		{Event: TaskEventPromptLost, Src: []TaskState{TaskRunning}, Dst: TaskFailed},
	},
})

// TaskRejectionEvent is RejectionEvent for the task's own machine.
func TaskRejectionEvent(rejectsSoFar, maxRejects int) TaskEvent {
	if RejectionEvent(rejectsSoFar, maxRejects) == EventMaxRejectsExceeded {
		return TaskEventMaxRejectsExceeded
	}
	return TaskEventRejected
}
