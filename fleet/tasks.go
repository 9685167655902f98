package fleet

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
	"example.com/pifleet/transport/trust"
)

// task is the fleet's record of one tracked task; guarded by Fleet.mu.
// m is its review state (TaskTable); rec.State is m's state as stored.
type task struct {
	rec  serverstore.Task
	m    fsmkit.Machine[TaskState, TaskEvent]
	done chan struct{} // closed on its first task_done
}

// newTask is a task record with its machine restored from rec.State.
func newTask(rec serverstore.Task) (*task, error) {
	m, err := TaskTable.Restore(TaskState(rec.State))
	if err != nil {
		return nil, err
	}
	return &task{rec: rec, m: m, done: make(chan struct{})}, nil
}

// open reports whether the task still waits for its worker or its
// review (not final).
func (t *task) open() bool { return !TaskTable.IsFinal(t.m.State()) }

func (t *task) markDoneLocked() {
	select {
	case <-t.done:
	default:
		close(t.done)
	}
}

// TaskKey names one task_done report: the instance, the task, and the
// agent's sequence number of the report. It is the dedupe key of
// Config.OnTaskDone's at-least-once delivery: a report handed out again
// after a crash of the server has the same key, and two different reports
// (a task's first run and its revision after a rejection) never share
// one. It is comparable, so it can key a map, and String is a stable form
// to store.
type TaskKey struct {
	InstanceID string
	TaskID     string
	Seq        int64
}

// String renders the key as "<instanceId>:<taskId>:<seq>", the form logs
// use.
func (k TaskKey) String() string {
	return k.InstanceID + ":" + k.TaskID + ":" + strconv.FormatInt(k.Seq, 10)
}

// TaskReport is a task_done as the application is told of it.
type TaskReport struct {
	// Key is the notification's dedupe key.
	Key        TaskKey
	TaskID     string
	InstanceID string
	// Seq is the agent's sequence number of the notification (Key.Seq).
	Seq int64
	// Status is settled, budget_exceeded or aborted.
	Status               string
	Summary              string
	LastAssistantMessage string
	TraceID              string
	// Order is the receipt order across the server's life (zero in
	// TaskInfo.LastDone).
	Order uint64
	// Worktree is an isolated worker's branch, base and the size of its
	// changes (nil for a worker in a shared cwd).
	Worktree *DiffStat
}

// Feedback is one rejection of a task.
type Feedback struct {
	At        time.Time
	Text      string
	Truncated bool
	// By says who rejected: "application" or "human".
	By string
	// Delivered is set once the feedback was sent to the worker as a new
	// prompt; feedback not delivered yet is sent again after a reconnect.
	Delivered bool
}

// TaskInfo describes a task and its review.
type TaskInfo struct {
	TaskID, InstanceID, Agent, Prompt, TraceID string
	// State is the review state (TaskTable).
	State      TaskState
	Rejects    int
	MaxRejects int
	Feedback   []Feedback
	// LastDone is the task's latest task_done, nil before the first.
	LastDone *TaskReport
	Verdict  string
	// Delivery is how the work was delivered (nil before).
	Delivery *Delivery
}

func infoOf(rec serverstore.Task) TaskInfo {
	info := TaskInfo{TaskID: rec.TaskID, InstanceID: rec.InstanceID, Agent: rec.Machine, Prompt: rec.Prompt,
		TraceID: rec.TraceID, State: TaskState(rec.State), Rejects: rec.Rejects, MaxRejects: rec.MaxRejects, Verdict: rec.Verdict}
	for _, fb := range rec.Feedback {
		info.Feedback = append(info.Feedback, Feedback{At: fb.At, Text: fb.Text, Truncated: fb.Truncated, By: fb.By, Delivered: fb.Delivered})
	}
	if rec.LastDone != nil {
		r := reportOf(*rec.LastDone, 0)
		info.LastDone = &r
	}
	if d := rec.Delivery; d != nil {
		info.Delivery = &Delivery{Mode: transport.DeliveryMode(d.Mode), Branch: d.Branch, Commit: d.Commit, Target: d.Target, Patch: d.Patch}
	}
	return info
}

// Task is a handle on one tracked task.
type Task struct {
	f  *Fleet
	id string
}

// ID returns the task id.
func (t *Task) ID() string { return t.id }

// Task returns a handle on a tracked task.
func (f *Fleet) Task(id string) (*Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tasks[id] == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTask, id)
	}
	return &Task{f: f, id: id}, nil
}

// Info returns the task's current record.
func (t *Task) Info() TaskInfo {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if tk := t.f.tasks[t.id]; tk != nil {
		return infoOf(tk.rec)
	}
	return TaskInfo{TaskID: t.id}
}

// Done is closed when the task's first task_done was recorded.
func (t *Task) Done() <-chan struct{} {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.tasks[t.id].done
}

// Wait waits until the task's first task_done was recorded and returns
// the task's record then. When the worker dies first (or its task_done
// only reports it aborted by the worker's end), Wait returns at once with
// a *WorkerGoneError (errors.Is(err, ErrWorkerGone)); when the instance
// was stopped before the task finished, with ErrInstanceEnded.
func (t *Task) Wait(ctx context.Context) (TaskInfo, error) {
	f := t.f
	f.mu.Lock()
	tk := f.tasks[t.id]
	if tk == nil {
		f.mu.Unlock()
		return TaskInfo{TaskID: t.id}, fmt.Errorf("%w: %q", ErrUnknownTask, t.id)
	}
	inst := f.instances[tk.rec.InstanceID]
	ended := make(chan struct{})
	if inst != nil {
		ended = inst.ended
	}
	f.mu.Unlock()
	select {
	case <-tk.done:
	case <-ended:
	case <-ctx.Done():
		return t.Info(), ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	info := infoOf(tk.rec)
	done := false
	select {
	case <-tk.done:
		done = true
	default:
	}
	if inst != nil && inst.gone != nil && (!done || info.LastDone == nil || info.LastDone.Status == string(transport.TaskAborted)) {
		return info, inst.gone
	}
	if !done {
		return info, inst.endErrLocked()
	}
	return info, nil
}

// Submit sends text to an idle worker as a tracked task: the agent
// reports its end with a durable task_done (Config.OnTaskDone hears of it
// at least once, keyed by TaskReport.Key) and the instance waits in
// awaiting_review for a verdict.
func (i *Instance) Submit(ctx context.Context, text string, opts PromptOptions) (*Task, error) {
	f := i.f
	f.mu.Lock()
	inst := f.instances[i.id]
	if inst == nil {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrUnknownInstance, i.id)
	}
	if !inst.m.Can(EventPromptDelivered) {
		st := inst.m.State()
		f.mu.Unlock()
		return nil, &StateError{Kind: "instance", ID: i.id, State: string(st), Op: "submit a task to"}
	}
	id := f.taskIDFor(inst)
	f.mu.Unlock()
	// The session is named after its task before the task starts.
	f.nameForTask(ctx, i.id, id, text)
	f.mu.Lock()
	t, _ := newTask(serverstore.Task{TaskID: id, InstanceID: i.id, Machine: inst.agent,
		Prompt: text, TraceID: inst.rec.TraceID, State: string(TaskTable.Initial()), MaxRejects: inst.maxRejects})
	// Recorded before it is sent: a task_done can never name a task the
	// store does not know.
	f.persistTaskLocked(t)
	f.tasks[id] = t
	f.mu.Unlock()
	if _, err := f.prompt(ctx, i.id, text, id, opts); err != nil {
		f.mu.Lock()
		delete(f.tasks, id)
		_, _ = f.store.DeleteTask(id)
		f.mu.Unlock()
		return nil, err
	}
	return &Task{f: f, id: id}, nil
}

// reviewLocked returns the task, its instance and the agent connection
// for a verdict, firing the implicit reviewStarted from awaiting_review.
func (f *Fleet) reviewLocked(taskID, op string, from ...InstanceState) (*task, *instance, *agentState, *transport.Conn, error) {
	t := f.tasks[taskID]
	if t == nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: %q", ErrUnknownTask, taskID)
	}
	inst, a, c, err := f.lookupLocked(t.rec.InstanceID, trust.OpSteer)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if inst.openTask != taskID {
		return nil, nil, nil, nil, &StateError{Kind: "task", ID: taskID, State: string(t.m.State()), Op: op}
	}
	if inst.m.State() == StateAwaitingReview {
		f.fireLocked(inst, EventReviewStarted, nil)
		f.fireTaskLocked(t, TaskEventReviewStarted)
	}
	for _, s := range from {
		if inst.m.State() == s {
			return t, inst, a, c, nil
		}
	}
	return nil, nil, nil, nil, &StateError{Kind: "task", ID: taskID, State: string(inst.m.State()), Op: op}
}

// StartReview marks the start of the application's review
// (awaiting_review → verifying). Verdicts start it implicitly.
func (t *Task) StartReview(context.Context) error {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, _, _, _, err := t.f.reviewLocked(t.id, "review", StateVerifying)
	return err
}

// Accept accepts the task (task_accept): with DispositionKeepIdle the
// worker stays idle for the next task; with DispositionStop it is stopped
// and Accept waits for the agent's stopped answer.
func (t *Task) Accept(ctx context.Context, disposition transport.Disposition) error {
	f := t.f
	var (
		inst *instance
		w    *waiter
	)
	err := f.whileQueueFull(ctx, "accept "+t.id, func() error {
		tk, in, a, c, err := f.reviewLocked(t.id, "accept", StateVerifying)
		if err != nil {
			return err
		}
		inst = in
		w, err = f.acceptLocked(tk, inst, a, c, disposition, "application")
		return err
	})
	if err != nil || w == nil {
		return err
	}
	return f.awaitEnd(ctx, inst, w)
}

func (f *Fleet) acceptLocked(tk *task, inst *instance, a *agentState, c *transport.Conn, disposition transport.Disposition, by string) (*waiter, error) {
	if disposition == "" {
		disposition = transport.DispositionStop
	}
	if disposition != transport.DispositionStop && disposition != transport.DispositionKeepIdle {
		return nil, fmt.Errorf("fleet: accept: disposition %q is neither stop nor keep_idle", disposition)
	}
	accept := &transport.TaskAcceptFrame{Header: transport.Header{TraceID: tk.rec.TraceID},
		TaskID: tk.rec.TaskID, Disposition: disposition, Deliver: transport.DeliverNone}
	if disposition == transport.DispositionKeepIdle {
		// A TypeScript agent does not handle task_accept (it would answer
		// unexpected_frame): the verdict is the server's alone there. A
		// pifleet agent answers keep_idle with an instances frame, which
		// needs no handling.
		if a.pifleet {
			if err := trySend(c, accept); err != nil {
				return nil, err
			}
		}
		tk.rec.Verdict, tk.rec.Disposition = "accepted by "+by, string(disposition)
		f.fireLocked(inst, EventTaskAccepted, nil)
		f.fireTaskLocked(tk, TaskEventAccepted)
		inst.openTask = ""
		f.fireTaskLocked(tk, TaskEventDispositionDone)
		f.fireLocked(inst, EventKeptIdle, nil)
		return nil, nil
	}
	// stop: a pifleet agent stops the worker on task_accept and answers
	// stopped; a TypeScript agent gets a stop.
	var w *waiter
	var err error
	if a.pifleet {
		w, err = f.requestLocked(a, c, accept, f.stopAnswer(inst))
	} else {
		w, err = f.sendStopLocked(inst, a, c)
	}
	if err != nil {
		return nil, err
	}
	tk.rec.Verdict, tk.rec.Disposition = "accepted by "+by, string(disposition)
	f.fireLocked(inst, EventTaskAccepted, nil)
	f.fireTaskLocked(tk, TaskEventAccepted)
	inst.openTask = ""
	f.fireTaskLocked(tk, TaskEventDispositionDone)
	f.fireLocked(inst, EventStopRequested, nil)
	return w, nil
}

// Reject sends the task back with feedback (task_reject), which the worker
// gets as a new prompt in the same session; the instance runs again. The
// rejection after review.maxRejects escalates instead (escalated: a human
// decides with Decide); it reports escalated true then.
func (t *Task) Reject(ctx context.Context, feedback string) (escalated bool, err error) {
	f := t.f
	err = f.whileQueueFull(ctx, "reject "+t.id, func() error {
		tk, inst, a, c, err := f.reviewLocked(t.id, "reject", StateVerifying)
		if err != nil {
			return err
		}
		ev := RejectionEvent(tk.rec.Rejects, tk.rec.MaxRejects)
		fb := serverstore.Feedback{At: f.cfg.Now(), Text: feedback, By: "application"}
		if ev == EventMaxRejectsExceeded {
			tk.rec.Rejects++
			tk.rec.Feedback = append(tk.rec.Feedback, fb)
			f.fireLocked(inst, EventMaxRejectsExceeded, nil)
			f.fireTaskLocked(tk, TaskEventMaxRejectsExceeded)
			f.publishLocked(Change{Kind: ChangeEscalated, Agent: inst.agent, InstanceID: inst.id, TaskID: tk.rec.TaskID,
				Message: fmt.Sprintf("rejected %d times (maxRejects %d): a human decides", tk.rec.Rejects, tk.rec.MaxRejects)})
			escalated = true
			return nil
		}
		// Queued before anything changes: on a full queue the rejection
		// is made again once there is room, or not at all.
		if err := trySend(c, feedbackFrame(tk, inst, a, feedback)); err != nil {
			return err
		}
		tk.rec.Rejects++
		fb.Delivered = true
		tk.rec.Feedback = append(tk.rec.Feedback, fb)
		f.fireLocked(inst, EventTaskRejected, nil)
		f.fireTaskLocked(tk, TaskEventRejected)
		f.feedbackDeliveredLocked(tk, inst)
		return nil
	})
	return escalated, err
}

// deliverFeedbackLocked sends the latest undelivered feedback of tk:
// task_reject to a pifleet agent, a tracked prompt "Revision requested:
// …" with the same task id to a TypeScript agent. Once queued,
// feedbackDelivered moves the instance back to running.
func (f *Fleet) deliverFeedbackLocked(tk *task, inst *instance, a *agentState, c *transport.Conn) error {
	n := len(tk.rec.Feedback)
	if n == 0 || tk.rec.Feedback[n-1].Delivered {
		return nil
	}
	if err := trySend(c, feedbackFrame(tk, inst, a, tk.rec.Feedback[n-1].Text)); err != nil {
		return err // stays revising; sent again after a reconnect
	}
	tk.rec.Feedback[n-1].Delivered = true
	f.feedbackDeliveredLocked(tk, inst)
	return nil
}

// feedbackFrame carries a rejection's feedback to the worker:
// task_reject to a pifleet agent, a tracked prompt "Revision requested:
// …" with the same task id to a TypeScript agent.
func feedbackFrame(tk *task, inst *instance, a *agentState, text string) transport.Frame {
	if a.pifleet {
		return &transport.TaskRejectFrame{Header: transport.Header{TraceID: tk.rec.TraceID}, TaskID: tk.rec.TaskID, Feedback: text}
	}
	cmd, _ := pirpc.EncodeCommand("", pirpc.Prompt{Message: "Revision requested: " + text})
	return &transport.RPCFrame{Header: transport.Header{TraceID: tk.rec.TraceID}, InstanceID: inst.id, Command: cmd, TaskID: tk.rec.TaskID}
}

// feedbackDeliveredLocked moves a revising instance back to running once
// its feedback is queued (feedbackDelivered) and stores the task.
func (f *Fleet) feedbackDeliveredLocked(tk *task, inst *instance) {
	inst.tally = pirpc.Tally{}
	f.fireLocked(inst, EventFeedbackDelivered, nil)
	f.fireTaskLocked(tk, TaskEventFeedbackDelivered)
}

// Verdict is a human's decision on an escalated task.
type Verdict struct {
	// Accept accepts with Disposition; otherwise the task is rejected
	// with Feedback, whatever the count of earlier rejections.
	Accept      bool
	Disposition transport.Disposition
	Feedback    string
}

// Decide applies a human's verdict to an escalated task (escalated →
// verifying, then the verdict).
func (t *Task) Decide(ctx context.Context, v Verdict) error {
	f := t.f
	f.mu.Lock()
	tk, inst, a, c, err := f.reviewLocked(t.id, "decide", StateEscalated)
	if err != nil {
		f.mu.Unlock()
		return err
	}
	f.fireLocked(inst, EventHumanDecided, nil)
	f.fireTaskLocked(tk, TaskEventHumanDecided)
	if v.Accept {
		w, err := f.acceptLocked(tk, inst, a, c, v.Disposition, "human")
		f.mu.Unlock()
		if err != nil || w == nil {
			return err
		}
		return f.awaitEnd(ctx, inst, w)
	}
	defer f.mu.Unlock()
	tk.rec.Rejects++
	tk.rec.Feedback = append(tk.rec.Feedback, serverstore.Feedback{At: f.cfg.Now(), Text: v.Feedback, By: "human"})
	f.fireLocked(inst, EventTaskRejected, nil)
	f.fireTaskLocked(tk, TaskEventRejected)
	return f.deliverFeedbackLocked(tk, inst, a, c)
}

// Tasks returns every tracked task.
func (f *Fleet) Tasks() []TaskInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]TaskInfo, 0, len(f.tasks))
	for _, t := range f.tasks {
		out = append(out, infoOf(t.rec))
	}
	sortBy(out, func(t TaskInfo) string { return t.TaskID })
	return out
}
