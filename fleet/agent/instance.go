package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/fleet/agent/internal/fsservice"
	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/transport"
)

// instance is one supervised worker of this agent life (or, with w nil
// and state lost, one of the previous life that could not be re-adopted).
type instance struct {
	a   *Agent
	id  string
	cwd string
	log zerolog.Logger
	fs  *fsservice.Service

	mu          sync.Mutex
	w           *worker.Worker
	spec        worker.Spec
	bundle      string
	bundleHash  string
	res         *cache.Result // the bundle it runs (nil when re-adopted until a rebundle)
	tools       []string
	model       *transport.ModelRef
	modelPinned bool // set while the worker's model is pinned (applyPin)
	traceID     string
	spawnID     string // the spawn request that started it (InstanceInfo.SpawnID)
	state       transport.InstanceState
	pid         int
	sessionPath string
	task        *openTask
	stopping    bool
	restarting  bool         // a restart (rebundle, set_tools) is in progress
	exit        *worker.Exit // how the worker ended, once it did
	exitTask    string       // the task that was open when it ended
	// rejection is the rejection id of the last task_reject carried
	// out: a restarted server may send a recorded rejection again. It is
	// stored in the instance record too (agentstore.Instance.Rejection).
	rejection string
	pumpDone  chan struct{}
	tree      *isolated                       // the worker's git worktree (nil: it runs in the spawn's cwd)
	waiters   map[string]chan json.RawMessage // command id → response line

	callSeq atomic.Uint64
	lastSeq atomic.Uint64 // seq of the newest event forwarded
}

// openTask is the task an instance works on (reference 1.10).
type openTask struct {
	id      string
	owner   string
	traceID string
	// rejection is what a revision carries out (zero for a prompt); it
	// is recorded with the task.
	rejection rejection
}

// rejection is the task_reject a revision carries out: its id ("" when
// the server sent none), the id of the one carried out before it, kept
// again should this one never reach the worker, and its prompt's message.
type rejection struct{ id, prev, prompt string }

// info is the instance as list reports it.
func (in *instance) info() transport.InstanceInfo {
	in.mu.Lock()
	defer in.mu.Unlock()
	ii := transport.InstanceInfo{
		InstanceID:  in.id,
		Cwd:         in.cwd,
		Bundle:      in.bundle,
		BundleHash:  in.bundleHash,
		SessionPath: in.sessionPath,
		State:       in.state,
		SpawnID:     in.spawnID,
	}
	if in.state == transport.InstanceRunning && in.pid > 0 {
		ii.PID = new(float64(in.pid))
	}
	if in.model != nil {
		m := *in.model
		ii.Model = &m
	}
	ii.ModelPinned = in.modelPinned
	ii.Worktree = in.worktreeInfoLocked()
	return ii
}

func (in *instance) running() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.state == transport.InstanceRunning && in.w != nil
}

func (in *instance) worker() *worker.Worker {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.w
}

// attach starts pumping w's events. Callers hold no lock.
func (in *instance) attach(w *worker.Worker) {
	snap := w.Snapshot()
	in.mu.Lock()
	in.w = w
	in.state = transport.InstanceRunning
	in.pid = snap.Pid
	if snap.SessionPath != "" {
		in.sessionPath = snap.SessionPath
	}
	done := make(chan struct{})
	in.pumpDone = done
	in.mu.Unlock()
	in.a.wg.Go(func() {
		defer close(done)
		in.pump(w)
	})
}

// pump forwards w's events in order and acts on the ones that matter:
// settles end tasks, exits end tasks and the instance, dialogs go to the
// server, model drift is reported.
func (in *instance) pump(w *worker.Worker) {
	s := newStreamer(in)
	defer s.flush()
	events := w.Events()
	for {
		ev, ok := s.next(events)
		if !ok {
			return
		}
		in.lastSeq.Store(ev.Seq)
		s.forward(ev)
		if ev.Raw != nil && ev.Kind == worker.KindResponse {
			in.answerWaiter(ev.Raw)
		}
		switch {
		case ev.Kind == "session_info_changed":
			// Renamed (baseline:…, task:…): the listing should say so now,
			// not at the next poll.
			in.a.rescanSessions()
		case ev.Kind == "agent_start":
			// The shim forgets an event once it is taken from Events. Store
			// that a run is open, so that an agent killed before it handled
			// the run's settle lets the next one re-adopt the worker with
			// the run open, and the settle still comes (exactly once).
			in.a.persistWorker(in.id, w)
		case ev.UIRequest != nil && !ev.UIRequest.AutoAnswered:
			in.a.broadcast(uiRequestFrame(in.id, ev.UIRequest), false)
		case ev.DialogEnded != nil:
			// Nobody can answer it any more: the servers stop asking.
			reason := transport.UIEndTimedOut
			if ev.DialogEnded.Outcome == worker.OutcomeCancelled {
				reason = transport.UIEndCancelled
			}
			in.a.broadcast(&transport.UIEndedFrame{InstanceID: in.id, RequestID: ev.DialogEnded.RequestID, Reason: reason}, true)
		case ev.Settled != nil:
			in.settled(w, ev.Settled)
		case ev.Drift != nil:
			in.drift(ev.Drift)
		case ev.Exit != nil:
			in.exited(w, ev.Exit)
			return
		}
	}
}

// settled ends the open task, if any, and stores how far the stream got.
func (in *instance) settled(w *worker.Worker, s *worker.Settled) {
	in.mu.Lock()
	t := in.task
	in.task = nil
	in.mu.Unlock()
	if t != nil {
		if s.Escalated {
			in.a.broadcast(&transport.TaskEscalatedFrame{TaskID: t.id, InstanceID: in.id,
				Reason: "a worker dialog went unanswered and was given its safe default"}, true)
		}
		status := transport.TaskSettled
		if s.BudgetExceeded {
			status = transport.TaskBudgetExceeded
		}
		st := s.Stats
		f := &transport.TaskDoneFrame{
			TaskID: t.id, InstanceID: in.id, Status: status,
			Summary:              summaryOf(s.LastAssistantText, status, s.BudgetReason),
			LastAssistantMessage: capBytes(s.LastAssistantText, MaxAssistantBytes),
			Stats: &transport.TaskStats{Turns: new(float64(st.Turns)), ToolCalls: new(float64(st.ToolCalls)),
				Cost: new(st.Cost), FilesChanged: new(float64(st.FilesChanged))},
		}
		f.TraceID = t.traceID
		in.a.finishTask(f, t.owner)
	}
	in.a.persistWorker(in.id, w)
	in.a.rescanSessions() // the run's entries are in the file now
}

// exited ends the open task as aborted and marks the instance ended.
func (in *instance) exited(w *worker.Worker, e *worker.Exit) {
	snap := w.Snapshot()
	in.mu.Lock()
	if in.restarting {
		// A restart failed to bring the worker up again: restart puts the
		// previous bundle back, or ends the instance itself.
		in.mu.Unlock()
		in.log.Warn().Int("code", e.Code).Str("stderr", tailChars(e.StderrTail, 300)).Msg("worker did not restart")
		return
	}
	t := in.task
	in.task = nil
	if in.stopping {
		in.state = transport.InstanceStopped
	} else if e.Lost {
		in.state = transport.InstanceLost
	} else {
		in.state = transport.InstanceExited
	}
	state := in.state
	in.pid = 0
	if snap.SessionPath != "" {
		in.sessionPath = snap.SessionPath
	}
	in.exit = e
	if t != nil {
		in.exitTask = t.id
	}
	notice := in.exitNoticeLocked()
	in.mu.Unlock()
	in.log.Info().Int("code", e.Code).Str("signal", e.Signal).Bool("lost", e.Lost).Msg("worker ended")
	// Before the task's task_done: a server learns that the worker is gone
	// first, so that an aborted task does not open a review of it.
	in.a.broadcast(notice, true)
	if t != nil {
		text := snap.LastAssistantText
		summary := text
		if tail := tailChars(e.StderrTail, StderrTailChars); tail != "" {
			summary = fmt.Sprintf("(worker exited %s) stderr: %s", exitText(e), tail)
		} else if summary == "" {
			summary = fmt.Sprintf("(worker exited %s)", exitText(e))
		}
		f := &transport.TaskDoneFrame{TaskID: t.id, InstanceID: in.id, Status: transport.TaskAborted,
			Summary: capChars(summary, SummaryChars), LastAssistantMessage: capBytes(text, MaxAssistantBytes)}
		f.TraceID = t.traceID
		in.a.finishTask(f, t.owner)
	}
	if _, err := in.a.store.UpdateInstance(in.id, func(r *agentstore.Instance) error {
		r.State = state
		r.SessionPath = snap.SessionPath
		return nil
	}); err != nil && !errors.Is(err, agentstore.ErrNotFound) {
		in.log.Error().Err(err).Msg("cannot record the worker's end")
	}
	in.a.rescanSessions()
}

// exitNoticeLocked is the worker_exited frame of an instance that ended
// (nil while it runs).
func (in *instance) exitNoticeLocked() *transport.WorkerExitedFrame {
	if in.state == transport.InstanceRunning {
		return nil
	}
	f := &transport.WorkerExitedFrame{InstanceID: in.id, State: in.state, SessionPath: in.sessionPath,
		TaskID: in.exitTask, Expected: in.state == transport.InstanceStopped, Lost: in.state == transport.InstanceLost}
	if e := in.exit; e != nil {
		f.Signal = e.Signal
		if !e.Lost && e.Signal == "" && e.Code >= 0 {
			f.ExitCode = new(float64(e.Code))
		}
	}
	return f
}

func (in *instance) exitNotice() *transport.WorkerExitedFrame {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.exitNoticeLocked()
}

func exitText(e *worker.Exit) string {
	switch {
	case e.Lost:
		return "lost"
	case e.Signal != "":
		return "signal " + e.Signal
	default:
		return fmt.Sprintf("%d", e.Code)
	}
}

// drift reports a model change (AC-4.7).
func (in *instance) drift(d *worker.Drift) {
	in.log.Warn().Str("from", d.From).Str("to", d.To).Bool("restored", d.Restored).Msg("model drift")
	in.a.broadcast(&transport.ModelDriftFrame{InstanceID: in.id, Expected: parseModel(d.From),
		Actual: parseModel(d.To), Refused: d.Restored}, true)
	if !d.Restored {
		m := parseModel(d.To)
		in.mu.Lock()
		in.model = &m
		in.mu.Unlock()
	}
}

// callPrefix starts the ids of the agent's own commands to a worker (the
// worker layer keeps "pifleet-<id>-" for its own).
const callPrefix = "agent-"

// call sends cmd (a JSON object without id) to the worker with a fresh id
// and waits for pi's response line.
func (in *instance) call(ctx context.Context, cmd map[string]any) (json.RawMessage, error) {
	w := in.worker()
	if w == nil {
		return nil, worker.ErrNotRunning
	}
	id := fmt.Sprintf("%s%s-%d", callPrefix, in.id, in.callSeq.Add(1))
	cmd["id"] = id
	raw, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	ch := make(chan json.RawMessage, 1)
	in.mu.Lock()
	if in.waiters == nil {
		in.waiters = map[string]chan json.RawMessage{}
	}
	in.waiters[id] = ch
	done := in.pumpDone
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.waiters, id)
		in.mu.Unlock()
	}()
	if err := w.Send(raw); err != nil {
		return nil, err
	}
	select {
	case line := <-ch:
		var r struct {
			Success bool   `json:"success"`
			Error   string `json:"error"`
		}
		if err := json.Unmarshal(line, &r); err == nil && !r.Success {
			return line, fmt.Errorf("agent: worker refused %v: %s", cmd["type"], r.Error)
		}
		return line, nil
	case <-done:
		return nil, worker.ErrNotRunning
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (in *instance) answerWaiter(raw json.RawMessage) {
	var r struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &r) != nil || r.ID == "" || !strings.HasPrefix(r.ID, callPrefix) {
		return
	}
	in.mu.Lock()
	ch := in.waiters[r.ID]
	in.mu.Unlock()
	if ch != nil {
		select {
		case ch <- raw:
		default:
		}
	}
}

// endedWait bounds how long Close waits for an ended worker to reap its
// shim, which goes once the worker's exit is acknowledged.
const endedWait = 5 * time.Second

// detach lets go of the worker, which keeps running under its shim. For a
// worker that has ended (its pump took the Exit) there is nothing to keep:
// detach waits until the Worker let go of everything, so that none of its
// goroutines outlives Close.
func (in *instance) detach() {
	in.mu.Lock()
	w, running := in.w, in.state == transport.InstanceRunning
	in.mu.Unlock()
	if w == nil {
		return
	}
	if !running {
		t := time.NewTimer(endedWait)
		defer t.Stop()
		select {
		case <-w.Done():
		case <-t.C:
			in.log.Warn().Dur("waited", endedWait).Msg("shim of an ended worker still there; letting go")
			w.Detach()
		}
		return
	}
	in.a.persistWorker(in.id, w)
	w.Detach()
}

// eventFrame is the event frame of one worker event, with its seq.
func eventFrame(instanceID string, ev worker.Event) *transport.EventFrame {
	seq := float64(ev.Seq)
	return &transport.EventFrame{InstanceID: instanceID, Event: ev.Raw, Seq: &seq}
}

// uiRequestFrame turns a worker dialog into ui_request. pi's editor dialog
// has no kind of its own on the wire: it is an input.
func uiRequestFrame(instanceID string, r *worker.UIRequest) *transport.UIRequestFrame {
	kind := transport.UIKind(r.Kind)
	switch kind {
	case transport.UIConfirm, transport.UISelect, transport.UIInput:
	default:
		kind = transport.UIInput
	}
	title := r.Title
	if title == "" {
		title = r.Kind
	}
	return &transport.UIRequestFrame{InstanceID: instanceID, RequestID: r.RequestID, Kind: kind,
		Title: title, Message: r.Message, Options: r.Options}
}

// parseModel reads "provider/id".
func parseModel(s string) transport.ModelRef {
	p, id, ok := strings.Cut(s, "/")
	if !ok {
		return transport.ModelRef{ID: s}
	}
	return transport.ModelRef{Provider: p, ID: id}
}

func summaryOf(text string, status transport.TaskStatus, budgetReason string) string {
	s := text
	if s == "" {
		s = "(no assistant output)"
	}
	if status == transport.TaskBudgetExceeded && budgetReason != "" {
		s = "(budget exceeded: " + budgetReason + ") " + s
	}
	return capChars(s, SummaryChars)
}

// capChars keeps the first n characters (runes) of s.
func capChars(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// tailChars keeps the last n characters of s.
func tailChars(s string, n int) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[len(r)-n:])
}

// capBytes keeps at most n bytes of s, cut on a character boundary.
func capBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
