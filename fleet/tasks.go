package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// task is the fleet's record of one tracked task; guarded by the core's
// lock (coreState: written under Fleet.mu too).
// m is its review state (TaskTable); rec.State is m's state as stored.
type task struct {
	rec  serverstore.Task
	m    fsmkit.Machine[TaskState, TaskEvent]
	done chan struct{} // closed on its first task_done
	// failed is closed (and err set) when the task ended without a
	// task_done and never will have one (TaskFailed).
	failed chan struct{}
	err    error
	// writes counts the writes of rec queued (persistLocked): a task_done
	// record that sees it move while it waited writes the task again.
	writes uint64
}

// failLocked ends the task's waiters with err.
func (t *task) failLocked(err error) {
	select {
	case <-t.failed:
	default:
		t.err = err
		close(t.failed)
	}
}

// newTask is a task record with its machine restored from rec.State.
func newTask(rec serverstore.Task) (*task, error) {
	m, err := TaskTable.Restore(TaskState(rec.State))
	if err != nil {
		return nil, err
	}
	return &task{rec: rec, m: m, done: make(chan struct{}), failed: make(chan struct{})}, nil
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
	f.core.mu.RLock()
	defer f.core.mu.RUnlock()
	if f.core.task(id) == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTask, id)
	}
	return &Task{f: f, id: id}, nil
}

// Info returns the task's current record.
func (t *Task) Info() TaskInfo {
	t.f.core.mu.RLock()
	defer t.f.core.mu.RUnlock()
	if tk := t.f.core.task(t.id); tk != nil {
		return infoOf(tk.rec)
	}
	return TaskInfo{TaskID: t.id}
}

// Done is closed when the task's first task_done was recorded.
func (t *Task) Done() <-chan struct{} {
	t.f.core.mu.RLock()
	defer t.f.core.mu.RUnlock()
	return t.f.core.task(t.id).done
}

// Wait waits until the task's first task_done was recorded and returns
// the task's record then. A task whose prompt was lost in flight (it
// failed: see TaskFailed) returns an error that errors.Is ErrPromptLost. When the worker dies first (or its task_done
// only reports it aborted by the worker's end), Wait returns at once with
// a *WorkerGoneError (errors.Is(err, ErrWorkerGone)); when the instance
// was stopped before the task finished, with ErrInstanceEnded.
func (t *Task) Wait(ctx context.Context) (TaskInfo, error) {
	f := t.f
	f.core.mu.RLock()
	tk := f.core.task(t.id)
	if tk == nil {
		f.core.mu.RUnlock()
		return TaskInfo{TaskID: t.id}, fmt.Errorf("%w: %q", ErrUnknownTask, t.id)
	}
	inst := f.core.instance(tk.rec.InstanceID)
	ended := make(chan struct{})
	if inst != nil {
		ended = inst.ended
	}
	f.core.mu.RUnlock()
	// select picks at random among ready cases: a task that has ended
	// answers with its outcome even when ctx is done too.
	over := func() bool {
		select {
		case <-tk.done:
		case <-ended:
		case <-tk.failed:
		default:
			return false
		}
		return true
	}
	if !over() {
		select {
		case <-tk.done:
		case <-ended:
		case <-tk.failed:
		case <-ctx.Done():
			if !over() {
				return t.Info(), ctx.Err()
			}
		}
	}
	f.core.mu.RLock()
	defer f.core.mu.RUnlock()
	info := infoOf(tk.rec)
	if tk.err != nil {
		return info, tk.err
	}
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
	inst := f.core.instance(i.id)
	if inst == nil {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrUnknownInstance, i.id)
	}
	if err := inst.refuseEndedLocked(); err != nil {
		f.mu.Unlock()
		return nil, err
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
	for {
		var d *drive
		err := f.whileQueueFull(ctx, "submit to "+i.id, func() (err error) {
			d, err = f.submitLocked(i.id, id, text, opts)
			return err
		})
		if err != nil {
			return nil, err
		}
		// The task's record is durable before its prompt is sent: a
		// task_done can never name a task the store does not know, and a
		// write that fails is Submit's error.
		_, _, err = f.finishStep(ctx, d)
		if err == nil {
			return &Task{f: f, id: id}, nil
		}
		f.unsubmit(d, id)
		var full *queueFullError
		switch {
		case errors.Is(err, errInstanceMoved):
			f.mu.Lock()
			err = &StateError{Kind: "instance", ID: i.id, State: string(d.inst.m.State()), Op: "submit a task to"}
			f.mu.Unlock()
		case errors.As(err, &full):
			if werr := full.conn.AwaitRoom(ctx); werr != nil && ctx.Err() != nil {
				return nil, fmt.Errorf("fleet: submit to %s: the agent's send queue stayed full (the agent is not reading): %w", i.id, ctx.Err())
			}
			continue
		}
		return nil, err
	}
}

// submitLocked opens the task and queues its record; the prompt follows
// once the record is durable (finishStep).
func (f *Fleet) submitLocked(instanceID, id, text string, opts PromptOptions) (*drive, error) {
	inst, a, c, err := f.lookupLocked(instanceID, trust.OpSteer)
	if err != nil {
		return nil, err
	}
	if inst.run != nil {
		return nil, &StateError{Kind: "instance", ID: instanceID, State: string(inst.m.State()) + " (a prompt is in flight)", Op: "submit a task to"}
	}
	t, _ := newTask(serverstore.Task{TaskID: id, InstanceID: instanceID, Machine: inst.agent,
		Prompt: text, TraceID: inst.rec.TraceID, State: string(TaskTable.Initial()), MaxRejects: inst.maxRejects,
		PromptEventSeq: inst.rec.LastSeenEventSeq})
	d := &drive{inst: inst, a: a, c: c, newTask: t, prompt: text, opts: opts, resumable: true}
	_, _, ok, err := f.stepLocked(d, coreInput{Kind: inSubmit, TaskID: id})
	if !ok {
		return nil, &StateError{Kind: "instance", ID: instanceID, State: string(inst.m.State()), Op: "submit a task to"}
	}
	if err != nil {
		// (Before the task's write: the plan stops at its persist.)
		f.unsubmitLocked(d, id)
		return nil, err
	}
	return d, nil
}

// unsubmit takes back a task whose prompt was not sent: nothing of it
// remains, in memory or (once its write is done) on disk. f.mu must not
// be held.
func (f *Fleet) unsubmit(d *drive, id string) {
	f.mu.Lock()
	f.unsubmitLocked(d, id)
	f.mu.Unlock()
	f.removeUnsent(d, id)
}

func (f *Fleet) unsubmitLocked(d *drive, id string) {
	if d.inst.openTask == id {
		d.inst.openTask = ""
		d.inst.gen++
	}
	f.core.removeTask(d.newTask)
}

// removeUnsent deletes the record of a task whose prompt was not sent,
// when its write reached the disk. f.mu must not be held.
func (f *Fleet) removeUnsent(d *drive, id string) {
	if d.taskWrite == nil || d.taskWrite.Wait() != nil {
		return // nothing on disk
	}
	err := f.store.Update(func(tx *serverstore.Tx) error { _, err := tx.DeleteTask(id); return err })
	if err != nil {
		f.log.Error().Err(err).Str("task", id).Msg("task not sent, and its record not removed")
	}
}

// verdictLocked returns the task's instance and its agent connection for
// a review step.
func (f *Fleet) verdictLocked(taskID, op string) (*drive, error) {
	t := f.core.task(taskID)
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTask, taskID)
	}
	if !t.open() { // said of the task before anything of its instance
		return nil, &StateError{Kind: "task", ID: taskID, State: string(t.m.State()), Op: op}
	}
	inst, a, c, err := f.lookupLocked(t.rec.InstanceID, trust.OpSteer)
	if err != nil {
		return nil, err
	}
	if inst.openTask != taskID {
		return nil, &StateError{Kind: "task", ID: taskID, State: string(t.m.State()), Op: op}
	}
	return &drive{inst: inst, a: a, c: c, resumable: true}, nil
}

// review runs one review step of the task (the implicit start of the
// review included) and returns the waiter of a stop it sent. Every plan
// of a review step queues its frame before it changes anything (but the
// start of the review, which a second attempt finds done): on a full
// queue it is made again once there is room, as long as ctx allows. It
// returns once the step's writes are durable, with a write's error.
func (t *Task) review(ctx context.Context, op string, in coreInput) (*drive, *waiter, error) {
	f := t.f
	var (
		d *drive
		w *waiter
	)
	err := f.whileQueueFull(ctx, op+" "+t.id, func() error {
		var err error
		if d, err = f.verdictLocked(t.id, op); err != nil {
			return err
		}
		var ok bool
		w, _, ok, err = f.stepLocked(d, in)
		if !ok {
			return &StateError{Kind: "task", ID: t.id, State: string(d.inst.m.State()), Op: op}
		}
		return err
	})
	if d == nil || (err != nil && d.writes == nil) {
		return d, w, err
	}
	// A rejection is durable before its frame is sent: the plan stopped
	// there, and goes on once the write is done. An instance that moved
	// meanwhile (a reconnect that delivered the pending feedback, say)
	// keeps the rejection as recorded: its feedback is sent again after a
	// reconnect, and the caller's rejection stands.
	w2, _, ferr := f.finishStep(ctx, d)
	if w2 != nil {
		w = w2
	}
	if errors.Is(ferr, errInstanceMoved) {
		ferr = nil
	}
	if err == nil {
		err = ferr
	}
	return d, w, err
}

// StartReview marks the start of the application's review
// (awaiting_review → verifying). Verdicts start it implicitly.
func (t *Task) StartReview(ctx context.Context) error {
	_, _, err := t.review(ctx, "review", coreInput{Kind: inReview})
	return err
}

// Accept accepts the task (task_accept): with DispositionKeepIdle the
// worker stays idle for the next task; with DispositionStop it is stopped
// and Accept waits for the agent's stopped answer. The verdict is stored
// in one transaction with the instance's new state.
func (t *Task) Accept(ctx context.Context, disposition transport.Disposition) error {
	disposition, err := checkDisposition(disposition)
	if err != nil {
		return err
	}
	return t.finish(ctx, "accept", coreInput{Kind: inAccept, Disposition: disposition, By: "application"})
}

// finish runs a verdict and waits for the stop it sent, if any.
func (t *Task) finish(ctx context.Context, op string, in coreInput) error {
	d, w, err := t.review(ctx, op, in)
	if w == nil || d == nil {
		return err
	}
	if aerr := t.f.awaitEnd(ctx, d.inst, w); aerr != nil {
		return aerr
	}
	return err
}

func checkDisposition(d transport.Disposition) (transport.Disposition, error) {
	switch d {
	case "":
		return transport.DispositionStop, nil
	case transport.DispositionStop, transport.DispositionKeepIdle:
		return d, nil
	}
	return "", &DispositionError{Disposition: d}
}

// Reject sends the task back with feedback (task_reject), which the worker
// gets as a new prompt in the same session; the instance runs again. The
// rejection after review.maxRejects escalates instead (escalated: a human
// decides with Decide); it reports escalated true then.
func (t *Task) Reject(ctx context.Context, feedback string) (escalated bool, err error) {
	d, _, err := t.review(ctx, "reject", coreInput{Kind: inReject, Text: feedback})
	if d == nil {
		return false, err
	}
	t.f.core.mu.RLock()
	escalated = d.inst.m.State() == StateEscalated
	t.f.core.mu.RUnlock()
	return escalated, err
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
	in := coreInput{Kind: inDecide, Accept: v.Accept, Text: v.Feedback}
	if v.Accept {
		d, err := checkDisposition(v.Disposition)
		if err != nil {
			return err
		}
		in.Disposition = d
	}
	return t.finish(ctx, "decide", in)
}

// Tasks returns every tracked task.
func (f *Fleet) Tasks() []TaskInfo {
	f.core.mu.RLock()
	defer f.core.mu.RUnlock()
	out := make([]TaskInfo, 0, f.core.taskCount())
	for t := range f.core.allTasks() {
		out = append(out, infoOf(t.rec))
	}
	sortBy(out, func(t TaskInfo) string { return t.TaskID })
	return out
}
