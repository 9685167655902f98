package fleet

import (
	"fmt"
	"strings"

	"example.com/pifleet/transport"
)

// The decision core of an instance and its open task: decide takes what
// the fleet knows of one instance (a coreView) and one input (a frame, a
// reconcile snapshot, an SDK call, a timer) and returns the plan, an
// ordered list of effects: the transitions of the instance's and the
// task's machines, and what the driver must do (send a frame, persist,
// ack, notify the application, release waiters). decide does no I/O,
// takes no lock and starts nothing; it is tested by the transcripts in
// testdata/core (core_test.go).
//
// The driver (applyLocked) carries the plan out in order and stops at the
// first effect that fails (a frame that cannot be queued, a write that
// does not reach the disk): what the plan puts before a send or a
// persist has happened, what it puts after has not, and the caller sees
// the error. So a plan orders "durable before the effect it licenses":
// the task record before the prompt, the verdict (task and instance in
// one transaction) before the instance is used again.

// coreView is what decide knows of one instance and its open task.
type coreView struct {
	Instance InstanceState
	// Connected: the agent's connection is established.
	Connected bool
	// Pifleet: the agent speaks the pifleet additions (task_accept,
	// task_reject).
	Pifleet bool
	// TaskID is the instance's open task ("" when none); Task its state.
	TaskID string
	Task   TaskState
	// Rejects so far and the task's maxRejects.
	Rejects, MaxRejects int
	// FeedbackPending: the latest feedback is not delivered yet.
	FeedbackPending bool
	// RunStarted: the worker started a run (agent_start) since the open
	// task's prompt or feedback was sent.
	RunStarted bool
	// RunInFlight: a prompt (tracked or not) waits to settle; its Run is
	// the driver's.
	RunInFlight bool
	// ReplayIncomplete: the last reconnect's replay of the agent's events
	// did not cover everything since the open task's prompt was sent (the
	// agent's bounded ring dropped some, or the replay failed): an
	// agent_start may have been missed, so RunStarted proves nothing.
	ReplayIncomplete bool
	// Spawning: the instance's spawn is not answered yet; it goes by its
	// spawn id (corespawn.go).
	Spawning bool
	// SpawnSent: the spawn's frame was queued; its answer is awaited.
	SpawnSent bool
	// SpawnCancel: the agent gives a spawn up on spawn_cancel.
	SpawnCancel bool
	// Intent: the spawn's intent is stored and not dropped yet.
	Intent bool
}

// inputKind names what happened.
type inputKind string

const (
	inSubmit       inputKind = "submit"        // SDK Submit: TaskID
	inPrompt       inputKind = "prompt"        // SDK Prompt, PromptAsync: an untracked prompt
	inTaskDone     inputKind = "task_done"     // frame: TaskID
	inRecorded     inputKind = "recorded"      // the task_done is durable: TaskID, Duplicate
	inReview       inputKind = "review"        // SDK StartReview
	inAccept       inputKind = "accept"        // SDK Accept: Disposition, By
	inReject       inputKind = "reject"        // SDK Reject: Text
	inDecide       inputKind = "decide"        // SDK Decide: Accept, Disposition, Text
	inAbort        inputKind = "abort"         // SDK Abort
	inStop         inputKind = "stop"          // SDK Stop
	inWorkerGone   inputKind = "worker_gone"   // frame or reconcile: Reason
	inSnapshot     inputKind = "snapshot"      // reconcile: a live worker's get_state (Streaming)
	inSettled      inputKind = "settled"       // frame: agent_settled
	inAbortTimeout inputKind = "abort_timeout" // timer: the abort's deadline passed
	inRestore      inputKind = "restore"       // New: the instance as the state file has it (Disposition of its task)
	inStopped      inputKind = "stopped"       // frame: the answer to a stop (or to task_accept with stop): Forced, SessionPath
	inStopRefused  inputKind = "stop_refused"  // frame: an error answering a stop: Code
	inWorkerExited inputKind = "worker_exited" // frame: the agent's notice that the worker ended: Reason, SessionPath
	inConnLost     inputKind = "connection_lost"
	// The spawn's inputs (corespawn.go).
	inSpawn         inputKind = "spawn"           // SDK Spawn: its checks passed, the instance is built
	inSpawnProgress inputKind = "spawn_progress"  // frame: Phase
	inSpawned       inputKind = "spawned"         // frame: the spawn's answer
	inSpawnError    inputKind = "spawn_error"     // frame: the agent refused the spawn (spawn_error, error): Code, Text
	inSpawnCancel   inputKind = "spawn_cancelled" // Spawn's context ended before the answer
	inSpawnLost     inputKind = "spawn_lost"      // the connection closed before the spawn's answer
	inListedSpawn   inputKind = "listed_spawn"    // reconcile: a worker listed under a spawn id the server does not know: Recorded, Own, Clone, Answering, Running
	// inConnLost: the agent's connection is lost (or, at New, not there
	// yet); the view says not connected.
)

// codeUnknownInstance is the agent's answer about an instance it does not
// know (docs/protocol.md).
const codeUnknownInstance = "unknown_instance"

func canInstance(s InstanceState, ev InstanceEvent) bool {
	_, ok := InstanceTable.Next(s, ev)
	return ok
}
func canTask(s TaskState, ev TaskEvent) bool { _, ok := TaskTable.Next(s, ev); return ok }

// coreInput is one input; the fields its kind does not use are zero.
type coreInput struct {
	Kind        inputKind
	TaskID      string
	Duplicate   bool
	Review      bool // inRecorded: the record changed the task's state with it
	Disposition transport.Disposition
	By          string
	Accept      bool
	Text        string
	Streaming   bool
	Reason      string
	// Forced: the agent killed the worker after its grace period.
	Forced bool
	// Code is the agent's error code.
	Code string
	// SessionPath is the worker's session file, as the frame says.
	SessionPath string
	// Stopped (inWorkerGone): the agent lists the worker as stopped, by a
	// stop.
	Stopped bool
	// Phase is the step a spawn_progress reports.
	Phase transport.SpawnPhase
	// A worker listed under a spawn id (inListedSpawn): Recorded, an
	// intent of its agent is stored for it; Own, the spawn id is this
	// server's and no intent is stored for it; Clone, the intent is of a
	// clone not named yet; Answering, the spawn's answer is still to come
	// on this connection; Running, the agent lists it running.
	Recorded, Own, Clone, Answering, Running bool
}

// effectKind names what the driver does.
type effectKind string

const (
	fxInstance  effectKind = "instance"  // fire Event on the instance's machine
	fxTask      effectKind = "task"      // fire TaskEvent on the task's machine
	fxOpen      effectKind = "open"      // a new task (TaskID) becomes the instance's open task
	fxDetach    effectKind = "detach"    // the instance has no open task any more
	fxSend      effectKind = "send"      // queue Frame on the agent connection
	fxPersist   effectKind = "persist"   // write Task and/or Instance records in one transaction
	fxRecord    effectKind = "record"    // record the task_done durably (Review: with its task's new state)
	fxAck       effectKind = "ack"       // task_done_ack
	fxNotify    effectKind = "notify"    // queue the report for the application
	fxDone      effectKind = "done"      // the task's first task_done: release Task.Done
	fxVerdict   effectKind = "verdict"   // note the verdict on the task (By, Disposition)
	fxFeedback  effectKind = "feedback"  // add a rejection (Text, By) and count it
	fxDelivered effectKind = "delivered" // the latest feedback was queued
	fxEscalate  effectKind = "escalate"  // tell subscribers a human must decide
	fxGone      effectKind = "gone"      // the worker died by itself (Reason)
	fxEnd       effectKind = "end"       // the instance is final: fail everybody waiting on it
	fxFailTask  effectKind = "fail"      // the task can no longer finish: fail its waiters (Reason)
	fxComplete  effectKind = "complete"  // the prompt in flight settled: release its waiters
	fxTimer     effectKind = "timer"     // arm the abort's deadline
	fxRoom      effectKind = "room"      // the agent's send queue has room for a frame (else the plan stops, nothing changed)
	fxReason    effectKind = "reason"    // note why the instance ended (Reason) in its record
	fxSession   effectKind = "session"   // note the worker's session file (Text) in the instance's record
	fxCatchUp   effectKind = "catchup"   // fetch the session file's last entries (written as the worker ended)
	// The spawn's effects (corespawn.go).
	fxIntent      effectKind = "intent"       // store the spawn's intent (before its frame)
	fxForget      effectKind = "forget"       // drop the spawn's intent
	fxTrack       effectKind = "track"        // the spawn's answer is awaited: the instance goes by its spawn id
	fxUntrack     effectKind = "untrack"      // the spawn's answer is no longer awaited
	fxAdd         effectKind = "add"          // the worker has its id: the instance joins the instance table
	fxDescribe    effectKind = "describe"     // note what the answer says of the worker (bundle hash, model, worktree) and annotate its session
	fxReplay      effectKind = "replay"       // handle the worker's events that came before it was known
	fxProgress    effectKind = "progress"     // tell subscribers and the caller of the spawn's step
	fxDegraded    effectKind = "degraded"     // note on the record that the cached bundle was used
	fxSpawnFailed effectKind = "spawn_failed" // the caller's Spawn fails (Reason; Code and Text of a refusal)
	fxAdopt       effectKind = "adopt"        // the listed worker's instance is built from its spawn's intent
	fxStray       effectKind = "stray"        // stop the listed worker of a given-up spawn, once the reconcile's listing is settled
)

// Frames the core asks for (effect.Frame).
const (
	frPrompt         = "prompt"           // the tracked prompt
	frUntracked      = "untracked_prompt" // a prompt that opens no task
	frTaskAccept     = "task_accept"      // with Disposition
	frTaskReject     = "task_reject"      // the feedback, pifleet agents
	frRevisionPrompt = "revision_prompt"  // the feedback as a tracked prompt, TypeScript agents
	frAbort          = "abort"
	frStop           = "stop"
	frSpawn          = "spawn"
	frSpawnCancel    = "spawn_cancel"
)

// effect is one step of a plan.
type effect struct {
	Kind        effectKind
	Event       InstanceEvent
	TaskEvent   TaskEvent
	TaskID      string
	Frame       string
	Disposition transport.Disposition
	// Task and Instance say which records a persist writes.
	Task, Instance bool
	Review         bool
	Text, By       string
	Reason         string
	// Code is the agent's error code of a refused spawn.
	Code string
	// Free: a send that waits for no write before it.
	Free bool
}

// String is the effect as a transcript shows it.
func (e effect) String() string {
	switch e.Kind {
	case fxInstance:
		return "instance " + string(e.Event)
	case fxTask:
		return "task " + string(e.TaskEvent)
	case fxOpen:
		return "open " + e.TaskID
	case fxSend:
		switch {
		case e.Disposition != "":
			return "send " + e.Frame + " " + string(e.Disposition)
		case e.Frame == frTaskReject || e.Frame == frRevisionPrompt:
			return "send " + e.Frame + " (the pending feedback)"
		case e.Free:
			return "send " + e.Frame + " (waits for no write)"
		}
		return "send " + e.Frame
	case fxPersist:
		var what []string
		if e.Task {
			what = append(what, "task")
		}
		if e.Instance {
			what = append(what, "instance")
		}
		return "persist " + strings.Join(what, "+")
	case fxRecord:
		if e.Review {
			return "record task_done with review"
		}
		return "record task_done"
	case fxVerdict:
		return fmt.Sprintf("verdict accepted by %s, %s", e.By, e.Disposition)
	case fxFeedback:
		return fmt.Sprintf("feedback by %s: %q", e.By, e.Text)
	case fxGone, fxFailTask, fxReason:
		return string(e.Kind) + ": " + e.Reason
	case fxSession:
		return "session " + e.Text
	case fxStray:
		return "stray: its worker is stopped once the listing is settled"
	case fxSpawnFailed:
		if e.Code != "" {
			return fmt.Sprintf("spawn_failed: %s %s %q", e.Reason, e.Code, e.Text)
		}
		return "spawn_failed: " + e.Reason
	}
	return string(e.Kind)
}

// plan builds a plan on a copy of the view, firing only what the
// machines allow.
type plan struct {
	v                    coreView
	fx                   []effect
	taskDirty, instDirty bool
}

func (p *plan) add(e effect) { p.fx = append(p.fx, e) }

// instance fires ev when the instance's state allows it; the
// reachability rule (idle and running mean reachable) follows at once.
func (p *plan) instance(ev InstanceEvent) bool {
	to, ok := InstanceTable.Next(p.v.Instance, ev)
	if !ok {
		return false
	}
	if !(reachabilityState(p.v.Instance) && reachabilityState(to)) {
		p.instDirty = true
	}
	p.v.Instance = to
	p.add(effect{Kind: fxInstance, Event: ev})
	if (to == StateIdle || to == StateRunning) && !p.v.Connected {
		p.instance(EventConnectionLost)
	}
	if InstanceTable.IsFinal(to) {
		p.add(effect{Kind: fxEnd})
	}
	return true
}

// task fires ev on the open task when its state allows it.
func (p *plan) task(ev TaskEvent) bool {
	if p.v.TaskID == "" {
		return false
	}
	to, ok := TaskTable.Next(p.v.Task, ev)
	if !ok {
		return false
	}
	p.v.Task = to
	p.taskDirty = true
	p.add(effect{Kind: fxTask, TaskEvent: ev})
	return true
}

func (p *plan) detach() {
	if p.v.TaskID != "" {
		p.add(effect{Kind: fxDetach})
		p.v.TaskID, p.v.Task, p.v.Rejects, p.v.FeedbackPending = "", "", 0, false
	}
}

// workerGone ends an instance whose worker died by itself: its open task
// ends (its task_done, if any follows, opens no review of a dead worker),
// and everybody waiting on it is released.
func (p *plan) workerGone(reason, sessionPath string) bool {
	if !canInstance(p.v.Instance, EventWorkerGone) {
		return false
	}
	p.task(TaskEventWorkerGone)
	p.detach()
	p.session(sessionPath)
	p.add(effect{Kind: fxGone, Reason: reason})
	p.instance(EventWorkerGone)
	p.persist()
	return true
}

// stopped ends a stopping instance as its stop did: the session file's
// last entries, written as the worker stopped, are fetched.
func (p *plan) stopped(forced bool, sessionPath string) {
	p.session(sessionPath)
	p.add(effect{Kind: fxCatchUp})
	if forced {
		p.add(effect{Kind: fxReason, Reason: "forced"})
		p.instance(EventStoppedForced)
	} else {
		p.instance(EventStoppedGracefully)
	}
	p.persist()
}

// session notes the worker's session file when the frame names one.
func (p *plan) session(path string) {
	if path != "" {
		p.add(effect{Kind: fxSession, Text: path})
		p.instDirty = true
	}
}

// persist writes what changed since the last persist, in one transaction.
func (p *plan) persist() {
	if !p.taskDirty && !p.instDirty {
		return
	}
	p.add(effect{Kind: fxPersist, Task: p.taskDirty, Instance: p.instDirty})
	p.taskDirty, p.instDirty = false, false
}

func (p *plan) send(frame string) { p.add(effect{Kind: fxSend, Frame: frame}) }

// review fires the implicit start of the review from awaiting_review.
func (p *plan) review() {
	if p.v.Instance == StateAwaitingReview {
		p.instance(EventReviewStarted)
		p.task(TaskEventReviewStarted)
		p.persist()
	}
}

// accept is a verdict; human says a human took up the escalated task.
// Its frame is queued before anything changes: a send that fails (a full
// queue) leaves the task as it was, to be accepted again.
func (p *plan) accept(d transport.Disposition, by string, human bool) {
	switch {
	case p.v.Pifleet:
		p.add(effect{Kind: fxSend, Frame: frTaskAccept, Disposition: d})
	case d == transport.DispositionStop:
		p.send(frStop)
	}
	// (keep_idle to a TypeScript agent: it does not handle task_accept;
	// the verdict is the server's alone.)
	if human {
		p.instance(EventHumanDecided)
		p.task(TaskEventHumanDecided)
	}
	p.add(effect{Kind: fxVerdict, By: by, Disposition: d})
	p.taskDirty = true
	p.instance(EventTaskAccepted)
	p.task(TaskEventAccepted)
	p.task(TaskEventDispositionDone)
	p.detach()
	if d == transport.DispositionKeepIdle {
		p.instance(EventKeptIdle)
	} else {
		p.instance(EventStopRequested)
	}
	p.persist() // the verdict, one transaction: no restart finds it half done
}

// recordFeedback counts a rejection and keeps its feedback, pending until
// the worker has it.
func (p *plan) recordFeedback(text, by string) {
	p.add(effect{Kind: fxFeedback, Text: text, By: by})
	p.taskDirty = true
	p.v.Rejects++
	p.v.FeedbackPending = true
}

// reject is a rejection; a human's is delivered whatever the count. The
// feedback is queued before anything changes, as a verdict is.
func (p *plan) reject(text, by string, human bool) {
	if !human && TaskRejectionEvent(p.v.Rejects, p.v.MaxRejects) == TaskEventMaxRejectsExceeded {
		p.recordFeedback(text, by)
		p.instance(EventMaxRejectsExceeded)
		p.task(TaskEventMaxRejectsExceeded)
		p.persist()
		p.add(effect{Kind: fxEscalate})
		return
	}
	// The rejection is durable before its frame is sent: a server killed
	// after the send finds it recorded (revising, the feedback pending)
	// and sends it again under the same rejection id, which the agent
	// carries out once. The queue's room is checked first, so that a
	// rejection refused on a full queue changes nothing.
	p.add(effect{Kind: fxRoom})
	if human {
		p.instance(EventHumanDecided)
		p.task(TaskEventHumanDecided)
	}
	p.recordFeedback(text, by)
	p.instance(EventTaskRejected)
	p.task(TaskEventRejected)
	p.persist()
	p.sendFeedback()
	p.delivered()
}

// sendFeedback sends the task's latest feedback, recorded before: as
// task_reject to a pifleet agent, as a tracked prompt to a TypeScript one.
func (p *plan) sendFeedback() {
	frame := frRevisionPrompt
	if p.v.Pifleet {
		frame = frTaskReject
	}
	p.add(effect{Kind: fxSend, Frame: frame})
}

// delivered: the feedback is queued; the worker runs again.
func (p *plan) delivered() {
	p.add(effect{Kind: fxDelivered})
	p.v.FeedbackPending = false
	p.taskDirty = true
	p.instance(EventFeedbackDelivered)
	p.task(TaskEventFeedbackDelivered)
	p.persist()
}

// deliver sends the pending feedback of a revising task (a rejection
// recorded by an older server, or whose send failed).
func (p *plan) deliver() {
	if p.v.Instance != StateRevising || !p.v.FeedbackPending {
		return
	}
	p.sendFeedback()
	p.delivered()
}

// decide returns the plan for in, and false when the input is refused in
// the view's state (an SDK call: the caller gets a *StateError; a frame
// or a snapshot: stale, nothing to do).
func decide(v coreView, in coreInput) ([]effect, bool) {
	p := &plan{v: v}
	if isSpawnInput(in.Kind) {
		if !p.decideSpawn(in) {
			return nil, false
		}
		return p.fx, true
	}
	switch in.Kind {
	case inSubmit:
		if v.TaskID != "" || !canInstance(v.Instance, EventPromptDelivered) {
			return nil, false
		}
		p.add(effect{Kind: fxOpen, TaskID: in.TaskID})
		p.v.TaskID, p.v.Task = in.TaskID, TaskTable.Initial()
		p.add(effect{Kind: fxPersist, Task: true}) // Submit returns only once the task is durable
		p.send(frPrompt)
		p.instance(EventPromptDelivered)

	case inPrompt:
		// One prompt at a time. In a review state the prompt asks the
		// worker for evidence and moves nothing.
		if v.RunInFlight {
			return nil, false
		}
		switch v.Instance {
		case StateIdle:
			p.send(frUntracked)
			p.instance(EventPromptDelivered)
		case StateAwaitingReview, StateVerifying, StateEscalated:
			p.send(frUntracked)
		default:
			return nil, false
		}

	case inTaskDone:
		review := v.TaskID == in.TaskID && in.TaskID != "" &&
			canTask(v.Task, TaskEventDone) && canInstance(v.Instance, EventTaskDone)
		p.add(effect{Kind: fxRecord, Review: review})

	case inRecorded:
		if !in.Duplicate {
			if in.Review && v.TaskID == in.TaskID {
				// The record stored the task's and the instance's new
				// states with the report, in its transaction.
				p.task(TaskEventDone)
				p.instance(EventTaskDone)
				p.taskDirty, p.instDirty = false, false
			} else if in.Review {
				// The record moved the stored task and instance to
				// awaiting_review, but the task ended meanwhile (failed
				// as a lost prompt, aborted, stopped; that change stored
				// the task): the instance's state here stands and is
				// written back, so that the store agrees with it after a
				// restart. The report is delivered all the same.
				p.instDirty = true
				p.persist()
			}
			p.add(effect{Kind: fxDone, TaskID: in.TaskID})
		}
		p.add(effect{Kind: fxAck})
		if !in.Duplicate {
			p.add(effect{Kind: fxNotify})
		}

	case inReview:
		p.review()
		if p.v.Instance != StateVerifying {
			return nil, false
		}

	case inAccept:
		p.review()
		if p.v.Instance != StateVerifying {
			return nil, false
		}
		p.accept(in.Disposition, in.By, false)

	case inReject:
		p.review()
		if p.v.Instance != StateVerifying {
			return nil, false
		}
		p.reject(in.Text, "application", false)

	case inDecide:
		p.review()
		if p.v.Instance != StateEscalated {
			return nil, false
		}
		if in.Accept {
			p.accept(in.Disposition, "human", true)
		} else {
			p.reject(in.Text, "human", true)
		}

	case inAbort:
		if !canInstance(v.Instance, EventAbortRequested) {
			return nil, false
		}
		p.send(frAbort)
		p.task(TaskEventAborted) // its task_done, which follows, opens no review
		p.detach()
		p.instance(EventAbortRequested)
		p.persist()
		p.add(effect{Kind: fxTimer})

	case inStop:
		if isSpawnState(v.Instance) {
			p.stopSpawn() // its answer ends it
			break
		}
		if !canInstance(v.Instance, EventStopRequested) {
			return nil, false
		}
		p.send(frStop)
		p.task(TaskEventStopped)
		p.detach()
		p.instance(EventStopRequested)
		p.persist()

	case inWorkerGone:
		if in.Stopped && v.Instance == StateStopping {
			// The agent carried the stop out; its answer was lost with
			// the connection.
			p.stopped(false, in.SessionPath)
			break
		}
		if !p.workerGone(in.Reason, in.SessionPath) {
			return nil, false
		}

	case inWorkerExited:
		if v.Instance == StateStopping {
			// The exit the server asked for: the stop's answer follows
			// and ends the instance (forced or not).
			break
		}
		if !p.workerGone(in.Reason, in.SessionPath) {
			return nil, false
		}

	case inStopped:
		if v.Instance != StateStopping {
			// Stale: the instance ended otherwise meanwhile.
			return nil, false
		}
		p.stopped(in.Forced, in.SessionPath)

	case inStopRefused:
		if in.Code == codeUnknownInstance {
			// The agent no longer knows the worker: it is gone.
			if !p.workerGone("the agent no longer knows it", "") {
				return nil, false
			}
			break
		}
		if v.Instance != StateStopping {
			return nil, false
		}
		// Any other refusal (a delivery that failed before a task_accept
		// with stop, for example) changes nothing here: the caller gets
		// the agent's error, and the instance stays stopping, its stop
		// sent again after the next reconnect.

	case inConnLost:
		// Only idle and running mean reachable; every other state keeps
		// its meaning during an outage, and its command is sent again
		// after the reconnect (InstanceTable). Waiters keep waiting: a
		// run may end while the agent is away (its task_done is sent
		// again, its events replayed), and a stop's answer comes after
		// the reconnect re-sent it.
		if !p.instance(EventConnectionLost) {
			return nil, false
		}
		p.persist()

	case inSettled:
		switch {
		case v.Instance == StateRunning && v.TaskID == "":
			p.instance(EventSettledUntracked)
		case v.Instance == StateAborting:
			p.instance(EventAbortConfirmed)
		}
		p.add(effect{Kind: fxComplete})

	case inAbortTimeout:
		if !p.instance(EventAbortTimedOut) {
			return nil, false
		}

	case inRestore:
		// A verdict stored by an older server in more than one write may
		// have stopped half-way (accepted, its disposition not carried
		// out): finish it as the verdict said.
		if v.Instance != StateAccepted {
			return nil, false
		}
		p.task(TaskEventDispositionDone)
		p.detach()
		if in.Disposition == transport.DispositionKeepIdle {
			p.instance(EventKeptIdle)
		} else {
			p.instance(EventStopRequested) // sent once the agent is connected again
		}
		p.persist()

	case inSnapshot:
		switch v.Instance {
		case StateUnreachable:
			if in.Streaming {
				p.instance(EventReconnectedRunning)
				break
			}
			if v.TaskID != "" && v.Task == TaskRunning && v.Pifleet && !v.RunStarted && !v.ReplayIncomplete {
				// The worker is idle, and it never started a run for the
				// task: a pifleet agent numbers every event and the
				// reconnect replayed the ones missed (events_since), so an
				// agent_start would have been seen before this snapshot.
				// The prompt never reached the worker, and no task_done
				// can come: the task ends failed instead of running
				// forever. (A run that did start ends with a task_done,
				// which may trail this snapshot: it opens the review from
				// idle. A replay that missed events since the prompt proves
				// nothing: the task waits for its task_done.)
				p.task(TaskEventPromptLost)
				p.add(effect{Kind: fxFailTask, TaskID: v.TaskID,
					Reason: "the prompt never reached the worker: after a reconnect it was idle, and no task_done came"})
				p.detach()
				p.persist()
			}
			p.instance(EventReconnectedIdle)
			p.add(effect{Kind: fxComplete})
		case StateAborting:
			if in.Streaming {
				p.send(frAbort)
				break
			}
			p.instance(EventAbortConfirmed)
			p.add(effect{Kind: fxComplete})
		case StateStopping:
			p.send(frStop)
		case StateRevising:
			p.deliver()
		}
	}
	return p.fx, true
}

// after is the view once plan was carried out in full (the transcripts
// follow the view from input to input with it).
func (v coreView) after(plan []effect) coreView {
	for _, e := range plan {
		switch e.Kind {
		case fxInstance:
			v.Instance, _ = InstanceTable.Next(v.Instance, e.Event)
		case fxTask:
			v.Task, _ = TaskTable.Next(v.Task, e.TaskEvent)
		case fxOpen:
			v.TaskID, v.Task, v.FeedbackPending, v.RunStarted = e.TaskID, TaskTable.Initial(), false, false
		case fxDetach:
			v.TaskID, v.Task, v.Rejects, v.FeedbackPending = "", "", 0, false
		case fxFeedback:
			v.Rejects++
			v.FeedbackPending = true
		case fxDelivered:
			v.FeedbackPending, v.RunStarted = false, false
		case fxIntent:
			v.Intent = true
		case fxForget:
			v.Intent = false
		case fxAdd:
			v.Spawning = false
		case fxTrack:
			v.SpawnSent = true
		}
	}
	return v
}
