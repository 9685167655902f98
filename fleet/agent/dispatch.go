package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/fleet/agent/internal/fsservice"
	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/transport"
)

// Agent error codes (error.code). The TypeScript agent sends the first
// four; the others name refusals of pifleet's additions.
const (
	CodeUnknownInstance    = "unknown_instance"
	CodeUnexpectedFrame    = "unexpected_frame"
	CodeInternal           = "internal"
	CodeExecDisabled       = "exec_disabled"
	CodeUnknownTask        = "unknown_task"
	CodeDeliverUnsupported = "deliver_unsupported"
	CodeModelPinned        = "model_pinned"
	CodeBadCommand         = "bad_command"
	CodeUnknownDialog      = "unknown_dialog"
	CodeRestartFailed      = "restart_failed"
)

// dispatchLoop handles one connection's frames in arrival order. Requests
// that take long (spawn, stop, rebundle, set_tools, fs_*, search) run on
// their own goroutine so that rpc frames are never held up behind them;
// everything a worker is told goes through its single writer in the order
// the frames arrived.
func (a *Agent) dispatchLoop(ctx context.Context, p *peer, frames <-chan transport.Frame) {
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-frames:
			a.dispatch(ctx, p, f)
		}
	}
}

func (a *Agent) dispatch(ctx context.Context, p *peer, f transport.Frame) {
	async := func(fn func() transport.Frame) {
		a.wg.Go(func() {
			if out := fn(); out != nil {
				p.reply(ctx, out)
			}
		})
	}
	switch f := f.(type) {
	case *transport.HelloFrame:
		p.greetedBy(f)
	case *transport.ErrorFrame:
		// Never answered (pitfall 5).
		a.log.Warn().Str("peer", p.key).Str("code", f.Code).Str("msg", f.Message).Msg("server reported an error")
	case *transport.TaskDoneAckFrame:
		a.ack(f)
	case *transport.ListFrame:
		out := &transport.InstancesFrame{Instances: a.list()}
		out.ID = f.ID
		p.reply(ctx, out)
	case *transport.SpawnFrame:
		sctx := a.cancellable(ctx, p, f.ID)
		async(func() transport.Frame { return a.spawn(sctx, p, f) })
	case *transport.SpawnCancelFrame:
		a.cancelSpawn(p, f.SpawnID)
	case *transport.StopFrame:
		async(func() transport.Frame { return a.stopIsolated(ctx, f) })
	case *transport.RPCFrame:
		if e := a.rpc(p, f); e != nil {
			p.reply(ctx, e)
		}
	case *transport.UIResponseFrame:
		if e := a.uiResponse(f); e != nil {
			p.reply(ctx, e)
		}
	case *transport.TaskAcceptFrame:
		async(func() transport.Frame { return a.taskAccept(ctx, p, f) })
	case *transport.DeliverFrame:
		async(func() transport.Frame { return a.deliverFrame(ctx, f) })
	case *transport.TaskRejectFrame:
		if e := a.taskReject(p, f); e != nil {
			p.reply(ctx, e)
		}
	case *transport.SessionSearchFrame:
		async(func() transport.Frame { return a.search(ctx, f) })
	case *transport.SessionEntriesFrame:
		async(func() transport.Frame { return a.sessionEntries(f) })
	case *transport.RepoHeadFrame:
		async(func() transport.Frame { return a.repoHead(ctx, f) })
	case *transport.CacheVerifyFrame:
		async(func() transport.Frame { return a.cacheVerify(ctx, f) })
	case *transport.EventsSinceFrame:
		a.eventsSince(ctx, p, f)
	case *transport.FsReadFrame, *transport.FsListFrame, *transport.FsGrepFrame, *transport.FsDiffFrame:
		async(func() transport.Frame { return a.fs(ctx, f) })
	case *transport.ExecStartFrame:
		a.execStart(ctx, p, f)
	case *transport.ExecAbortFrame:
		p.reply(ctx, a.execAbort(f))
	case *transport.ExecListFrame:
		p.reply(ctx, a.execList(f))
	case *transport.RebundleFrame:
		async(func() transport.Frame { return a.rebundle(ctx, f) })
	case *transport.SetToolsFrame:
		async(func() transport.Frame { return a.setTools(ctx, f) })
	case *transport.ModelPinFrame:
		p.reply(ctx, a.modelPin(f))
	default:
		p.reply(ctx, &transport.ErrorFrame{Code: CodeUnexpectedFrame, Message: "agent does not handle " + f.FrameType()})
	}
}

// lookup returns the instance of this life with id (nil when unknown).
func (a *Agent) lookup(id string) *instance {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.instances[id]
}

// list is every instance of this life in start order, then the previous
// life's lost ones.
func (a *Agent) list() []transport.InstanceInfo {
	a.mu.Lock()
	ids := slices.Clone(a.order)
	lost := slices.Clone(a.lost)
	a.mu.Unlock()
	out := make([]transport.InstanceInfo, 0, len(ids)+len(lost))
	for _, id := range ids {
		if in := a.lookup(id); in != nil {
			out = append(out, in.info())
		}
	}
	for _, in := range lost {
		out = append(out, in.info())
	}
	return out
}

// stop ends a worker gracefully (abort, wait for the run, close stdin),
// killing its process group after the grace period (AC-2.7).
func (a *Agent) stop(ctx context.Context, req transport.Frame, id string) transport.Frame {
	in := a.lookup(id)
	if in == nil {
		return errorFrame(req, CodeUnknownInstance, "no instance "+id)
	}
	forced := false
	in.mu.Lock()
	w, running := in.w, in.state == transport.InstanceRunning
	if running {
		in.stopping = true
	}
	done := in.pumpDone
	in.mu.Unlock()
	if running && w != nil {
		var err error
		forced, err = w.Stop(ctx)
		if err != nil {
			in.log.Warn().Err(err).Msg("stop")
		}
		if done != nil {
			<-done // the exit was handled: state, task
		}
	}
	in.mu.Lock()
	in.state = stoppedState(in.state)
	path := in.sessionPath
	in.mu.Unlock()
	out := &transport.StoppedFrame{InstanceID: id, Forced: forced, SessionPath: path}
	out.ID = req.Envelope().ID
	return out
}

func stoppedState(s transport.InstanceState) transport.InstanceState {
	if s == transport.InstanceRunning {
		return transport.InstanceStopped
	}
	return s
}

// rpc forwards one command to a worker; a taskId opens a task first.
func (a *Agent) rpc(p *peer, f *transport.RPCFrame) transport.Frame {
	return a.rpcFor(p, f, rejection{})
}

// rpcFor is rpc for a revision that carries out rej (zero for none): its
// id is recorded with the task, in one transaction, before the command
// reaches the worker.
func (a *Agent) rpcFor(p *peer, f *transport.RPCFrame, rej rejection) transport.Frame {
	in := a.lookup(f.InstanceID)
	if in == nil || !in.running() {
		return errorFrame(f, CodeUnknownInstance, "no running instance "+f.InstanceID)
	}
	var prev *openTask
	if f.TaskID != "" {
		traceID := f.TraceID
		if traceID == "" {
			traceID = in.traceID
		}
		t := &openTask{id: f.TaskID, owner: p.key, traceID: traceID, rejection: rej}
		in.mu.Lock()
		old := in.task
		if old != nil && old.id != t.id {
			in.task = nil
		}
		in.mu.Unlock()
		if old != nil && old.id != t.id {
			// One open task per instance (reference 1.10): the older one
			// ends now, reported aborted, so that no task goes without a
			// task_done. Stored before the new task is recorded.
			done := &transport.TaskDoneFrame{TaskID: old.id, InstanceID: in.id, Status: transport.TaskAborted,
				Summary: "(superseded by task " + t.id + " before it settled)"}
			done.TraceID = old.traceID
			if !a.finishTask(done, old.owner) {
				// Recording the new task would overwrite the old one's
				// record before its report is stored: a crash then would
				// lose it. The report waits in memory; the new task waits
				// for the disk.
				return errorFrame(f, CodeInternal, fmt.Sprintf("cannot record task %s: the report of task %s, which it supersedes, cannot be stored yet (is the agent's disk full?)", t.id, old.id))
			}
		}
		if err := a.openTask(in, t); err != nil {
			return errorFrame(f, CodeInternal, err.Error())
		}
		a.nameBranch(in, t.id, f.Command)
		in.mu.Lock()
		prev, in.task = in.task, t
		in.mu.Unlock()
	}
	if rej.prompt != "" {
		a.hooks.spawnPoint(holdRevisionRecorded)
	}
	w := in.worker()
	if err := w.Send(f.Command); err != nil {
		if f.TaskID != "" { // the task never started
			in.mu.Lock()
			in.task = prev
			in.mu.Unlock()
			a.closeTaskRecord(in.id, f.TaskID, rej)
		}
		switch {
		case errors.Is(err, worker.ErrModelPinned):
			a.broadcast(&transport.ModelDriftFrame{InstanceID: in.id, Expected: in.modelRef(), Actual: in.modelRef(), Refused: true}, true)
			return errorFrame(f, CodeModelPinned, err.Error())
		case errors.Is(err, worker.ErrBadCommand):
			return errorFrame(f, CodeBadCommand, err.Error())
		case errors.Is(err, worker.ErrNotRunning):
			return errorFrame(f, CodeUnknownInstance, "no running instance "+f.InstanceID)
		default:
			return errorFrame(f, CodeInternal, err.Error())
		}
	}
	if rej.prompt != "" {
		a.hooks.spawnPoint(holdRevisionSent)
		a.revisionHandedOver(in, rej.prompt)
	}
	return nil
}

// revisionHandedOver notes that the revision prompt message reached the
// worker's shim, which delivers it even should the agent die now. Until
// this is stored, a restarted agent looks for the prompt in the worker's
// session and sends it if it is not there (revisionArrived).
func (a *Agent) revisionHandedOver(in *instance, message string) {
	_, err := a.store.UpdateInstance(in.id, func(r *agentstore.Instance) error {
		if r.Revision == message {
			r.Revision = ""
		}
		return nil
	})
	if err != nil {
		in.log.Warn().Err(err).Msg("cannot note that the revision prompt was sent; a restart checks the session for it")
	}
}

func (in *instance) modelRef() transport.ModelRef {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.model == nil {
		return transport.ModelRef{}
	}
	return *in.model
}

// openTask records the task in the registry before the command reaches
// the worker: a crash from here on still ends it with a task_done. The
// rejection a revision carries out is recorded in the same transaction,
// so that a restarted agent neither forgets a rejection the worker has
// (it would revise twice) nor remembers one without the task that makes
// the worker's next settle answer it (the review would wait forever).
// So is the revision's prompt, until the worker's shim has it
// (revisionHandedOver): a restarted agent sends it if it never arrived.
func (a *Agent) openTask(in *instance, t *openTask) error {
	_, err := a.store.UpdateInstance(in.id, func(r *agentstore.Instance) error {
		r.TaskID, r.TaskOwner = t.id, t.owner
		r.Revision = t.rejection.prompt // none for a prompt that is no revision
		if t.rejection.id != "" {
			r.Rejection = t.rejection.id
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot record task %s: %w", t.id, err)
	}
	a.rememberTask(t.id, in.id)
	return nil
}

// closeTaskRecord undoes openTask for a command that never reached the
// worker: the task, and the rejection it would have carried out (a
// resend may try again).
func (a *Agent) closeTaskRecord(instanceID, taskID string, rej rejection) {
	_, _ = a.store.UpdateInstance(instanceID, func(r *agentstore.Instance) error {
		if r.TaskID == taskID {
			r.TaskID, r.TaskOwner = "", ""
		}
		if rej.prompt != "" && r.Revision == rej.prompt {
			r.Revision = ""
		}
		if rej.id != "" && r.Rejection == rej.id {
			r.Rejection = rej.prev
		}
		return nil
	})
}

// uiResponse answers a worker dialog.
func (a *Agent) uiResponse(f *transport.UIResponseFrame) transport.Frame {
	in := a.lookup(f.InstanceID)
	if in == nil || !in.running() {
		return errorFrame(f, CodeUnknownInstance, "no running instance "+f.InstanceID)
	}
	var value any
	if len(f.Value) > 0 {
		if err := json.Unmarshal(f.Value, &value); err != nil {
			return errorFrame(f, CodeBadCommand, "ui_response value: "+err.Error())
		}
	}
	if err := in.worker().AnswerUI(f.RequestID, value, f.TimedOut || value == nil); err != nil {
		if errors.Is(err, worker.ErrUnknownDialog) {
			return errorFrame(f, CodeUnknownDialog, err.Error())
		}
		return errorFrame(f, CodeInternal, err.Error())
	}
	return nil
}

// taskAccept ends a task's review: deliver its work (an isolated worker:
// branch, patch, merge; a failed delivery changes nothing and the task
// stays open), then stop the worker, or keep it idle. A stopped isolated
// worker's worktree is removed; its branch stays when the work was
// delivered as a branch or merged, and goes when nothing was delivered.
func (a *Agent) taskAccept(ctx context.Context, p *peer, f *transport.TaskAcceptFrame) transport.Frame {
	id := a.taskInstance(f.TaskID)
	in := a.lookup(id)
	if in == nil {
		return errorFrame(f, CodeUnknownTask, "no task "+f.TaskID)
	}
	if f.Deliver != transport.DeliverNone {
		if f.Deliver == transport.DeliverPR {
			return errorFrame(f, CodeDeliverUnsupported, `deliver "pr" is not supported by this agent; use "branch" and open the pull request yourself`)
		}
		d, err := a.deliverWork(ctx, in, deliverRequest{taskID: f.TaskID, mode: f.Deliver, target: f.Target, message: f.Message})
		if err != nil {
			return deliveryError(f, err)
		}
		p.reply(ctx, d) // before the disposition's answer
	}
	if f.Disposition == transport.DispositionStop {
		out := a.stop(ctx, f, id)
		a.retireWorktree(ctx, in)
		return out
	}
	out := &transport.InstancesFrame{Instances: []transport.InstanceInfo{in.info()}}
	out.ID = f.ID
	return out
}

// RevisionPrompt starts the prompt task_reject sends: the reviewer's
// feedback follows on the next line.
const RevisionPrompt = "Revision requested:\n"

// revisionCommand is the rpc command of a revision prompt.
func revisionCommand(message string) map[string]any {
	return map[string]any{"type": "prompt", "message": message}
}

// taskReject sends the feedback into the same session as a new prompt
// under the same taskId: the next settle is the next review cycle.
func (a *Agent) taskReject(p *peer, f *transport.TaskRejectFrame) (out transport.Frame) {
	id := a.taskInstance(f.TaskID)
	in := a.lookup(id)
	if in == nil {
		return errorFrame(f, CodeUnknownTask, "no task "+f.TaskID)
	}
	if !in.running() {
		return errorFrame(f, CodeUnknownInstance, "no running instance "+id)
	}
	message := RevisionPrompt + f.Feedback
	cmd, err := jsonObject(revisionCommand(message))
	if err != nil {
		return errorFrame(f, CodeInternal, err.Error())
	}
	// A server records a rejection before it sends it; one killed after
	// the send sends it again once restarted, under the same rejection
	// id: the worker revises once. The id is claimed here (a resend that
	// races this one finds it) and stored with the revision's task before
	// the prompt reaches the worker, so that a restarted agent knows it
	// too (it is read back at re-adoption).
	rej := rejection{prompt: message}
	if f.RejectionID != "" {
		in.mu.Lock()
		done := in.rejection == f.RejectionID
		rej = rejection{id: f.RejectionID, prev: in.rejection, prompt: message}
		in.rejection = f.RejectionID
		in.mu.Unlock()
		if done {
			return nil
		}
		defer func() {
			if out != nil { // not carried out: a resend may try again
				in.mu.Lock()
				if in.rejection == rej.id {
					in.rejection = rej.prev
				}
				in.mu.Unlock()
			}
		}()
	}
	rpc := &transport.RPCFrame{InstanceID: id, Command: cmd, TaskID: f.TaskID}
	rpc.ID, rpc.TraceID = f.ID, f.TraceID
	return a.rpcFor(p, rpc, rej)
}

// fs answers fs_* from the instance's cwd (stopped and exited included).
func (a *Agent) fs(ctx context.Context, f transport.Frame) transport.Frame {
	var id string
	switch r := f.(type) {
	case *transport.FsReadFrame:
		id = r.InstanceID
	case *transport.FsListFrame:
		id = r.InstanceID
	case *transport.FsGrepFrame:
		id = r.InstanceID
	case *transport.FsDiffFrame:
		id = r.InstanceID
	}
	in := a.lookup(id)
	if in == nil {
		out := &transport.FsResultFrame{Done: true, Error: &transport.FsError{Code: string(fsservice.CodeUnknownInstance), Message: "no instance " + id}}
		out.ID = f.Envelope().ID
		return out
	}
	if d, ok := f.(*transport.FsDiffFrame); ok && d.Base {
		out := a.baseDiff(ctx, in, d)
		out.ID = d.ID
		return out
	}
	out, _ := in.fs.Handle(ctx, f)
	out.ID = f.Envelope().ID
	return out
}
