package fleet

import (
	"errors"
	"fmt"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
)

// The driver of the decision core (core.go): it builds the core's view of
// an instance from the fleet's records and carries out the core's plans.

// viewLocked is the core's view of inst. f.mu must be held.
func (f *Fleet) viewLocked(inst *instance) coreView {
	v := coreView{Instance: inst.m.State(), TaskID: inst.openTask, RunStarted: inst.runStarted, ReplayIncomplete: inst.replayIncomplete}
	if a := f.agents[inst.agent]; a != nil {
		v.Connected = a.conn != nil
		v.Pifleet = a.pifleet
	}
	if t := f.tasks[inst.openTask]; t != nil {
		v.Task = t.m.State()
		v.Rejects, v.MaxRejects = t.rec.Rejects, t.rec.MaxRejects
		n := len(t.rec.Feedback)
		v.FeedbackPending = n > 0 && !t.rec.Feedback[n-1].Delivered
	}
	return v
}

// drive is what a plan is carried out with: the instance, and what the
// input brought along.
type drive struct {
	inst *instance
	a    *agentState
	c    *transport.Conn
	// submit: the new task's record, prompt and options.
	newTask *task
	prompt  string
	opts    PromptOptions
	// run is the Run a prompt started; persisted says a write of the new
	// task reached the disk (Submit undoes it when the send fails).
	run       *Run
	persisted bool
	// td is the task_done a recorded input is about.
	td *serverstore.TaskDone
}

// stepLocked decides in and carries the plan out. ok is false when the
// core refused the input in the instance's state.
func (f *Fleet) stepLocked(d *drive, in coreInput) (w *waiter, after []func(), ok bool, err error) {
	plan, ok := decide(f.viewLocked(d.inst), in)
	if !ok {
		return nil, nil, false, nil
	}
	w, after, err = f.applyLocked(d, plan)
	return w, after, true, err
}

// applyLocked carries plan out in order and stops at the first effect
// that fails, returning its error. It returns the waiter of a stop (or of
// a task_accept that stops), and what must run once f.mu is released.
func (f *Fleet) applyLocked(d *drive, plan []effect) (w *waiter, after []func(), err error) {
	inst := d.inst
	// A plan is about the instance's open task, before and after it is
	// detached.
	t := f.tasks[inst.openTask]
	for _, e := range plan {
		switch e.Kind {
		case fxInstance:
			f.transitionLocked(inst, e.Event)
		case fxTask:
			if t != nil {
				f.fireTaskLocked(t, e.TaskEvent)
			}
		case fxOpen:
			t = d.newTask
			f.tasks[e.TaskID] = t
			inst.openTask = e.TaskID
		case fxDetach:
			inst.openTask = ""
		case fxSend:
			w2, err := f.sendLocked(d, t, e)
			if errors.Is(err, errFeedbackDeferred) {
				return w, after, nil // recorded; delivered after a reconnect
			}
			if err != nil {
				return w, after, err
			}
			if w2 != nil {
				w = w2
			}
		case fxRoom:
			if d.c == nil {
				return w, after, fmt.Errorf("%w: %s", ErrNotConnected, inst.agent)
			}
			if !d.c.HasRoom() {
				return w, after, &queueFullError{conn: d.c}
			}
		case fxPersist:
			var pt *task
			if e.Task {
				pt = t
			}
			if err := f.persistLocked(pt, inst, e.Instance); err != nil {
				return w, after, err
			}
			if pt != nil && pt == d.newTask {
				d.persisted = true
			}
		case fxDone:
			if dt := f.tasks[e.TaskID]; dt != nil && d.td != nil {
				if dt.rec.InstanceID == d.td.InstanceID {
					done := *d.td
					dt.rec.LastDone = &done // as the record stored it
				}
				dt.markDoneLocked()
			}
		case fxVerdict:
			if t != nil {
				t.rec.Verdict, t.rec.Disposition = "accepted by "+e.By, string(e.Disposition)
			}
		case fxFeedback:
			if t != nil {
				t.rec.Rejects++
				t.rec.Feedback = append(t.rec.Feedback, serverstore.Feedback{At: f.cfg.Now(), Text: e.Text, By: e.By})
			}
		case fxDelivered:
			if t != nil {
				t.rec.Feedback[len(t.rec.Feedback)-1].Delivered = true
			}
			inst.tally = pirpc.Tally{}
			inst.runStarted = false
			if t != nil {
				t.rec.PromptEventSeq = inst.rec.LastSeenEventSeq // persisted with the delivery
			}
		case fxEscalate:
			if t != nil {
				f.publishLocked(Change{Kind: ChangeEscalated, Agent: inst.agent, InstanceID: inst.id, TaskID: t.rec.TaskID,
					Message: fmt.Sprintf("rejected %d times (maxRejects %d): a human decides", t.rec.Rejects, t.rec.MaxRejects)})
			}
		case fxGone:
			inst.gone = &WorkerGoneError{InstanceID: inst.id, Reason: e.Reason}
			inst.rec.EndReason = "worker gone: " + e.Reason
		case fxEnd:
			inst.endLocked()
			f.detachSessionLocked(inst)
		case fxFailTask:
			if t != nil {
				t.failLocked(fmt.Errorf("%w: task %s: %s", ErrPromptLost, t.rec.TaskID, e.Reason))
			}
		case fxComplete:
			after = append(after, inst.completeRunLocked(inst.tally.LastAssistantText, nil))
		case fxTimer:
			f.armAbortDeadlineLocked(inst)
		case fxReason:
			inst.rec.EndReason = e.Reason
		case fxSession:
			inst.rec.SessionPath = e.Text
		case fxCatchUp:
			f.scheduleCatchUpLocked(inst.agent, 0, inst.id)
		case fxRecord, fxAck, fxNotify:
			// Carried out by onTaskDone, around the record.
		}
	}
	return w, after, nil
}

// errFeedbackDeferred: a recorded rejection's frame could not be queued;
// it is sent again once the agent is connected again.
var errFeedbackDeferred = errors.New("fleet: feedback not queued")

// sendLocked queues the frame effect e asks for.
func (f *Fleet) sendLocked(d *drive, t *task, e effect) (*waiter, error) {
	inst, a, c := d.inst, d.a, d.c
	if c == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotConnected, inst.agent)
	}
	hdr := transport.Header{TraceID: inst.rec.TraceID}
	switch e.Frame {
	case frPrompt:
		r, err := f.startRunLocked(inst, c, d.prompt, t.rec.TaskID, d.opts)
		d.run = r
		inst.runStarted = false
		return nil, err
	case frAbort:
		return nil, f.sendAbortLocked(inst, c)
	case frStop:
		return f.sendStopLocked(inst, a, c)
	case frTaskAccept:
		if t == nil {
			return nil, errors.New("fleet: accept: no open task")
		}
		fr := &transport.TaskAcceptFrame{Header: hdr, TaskID: t.rec.TaskID, Disposition: e.Disposition, Deliver: transport.DeliverNone}
		if e.Disposition == transport.DispositionStop {
			return f.requestLocked(a, c, fr, f.stopAnswer(inst))
		}
		return nil, trySend(c, fr)
	case frTaskReject, frRevisionPrompt:
		text := e.Text
		if e.Pending {
			if t == nil || len(t.rec.Feedback) == 0 {
				return nil, errors.New("fleet: no feedback to deliver")
			}
			text = t.rec.Feedback[len(t.rec.Feedback)-1].Text
		}
		if t == nil {
			return nil, errors.New("fleet: reject: no open task")
		}
		var fr transport.Frame = &transport.TaskRejectFrame{Header: hdr, TaskID: t.rec.TaskID, Feedback: text,
			RejectionID: fmt.Sprintf("%s#%d", t.rec.TaskID, len(t.rec.Feedback))}
		if e.Frame == frRevisionPrompt {
			cmd, _ := pirpc.EncodeCommand("", pirpc.Prompt{Message: "Revision requested: " + text})
			fr = &transport.RPCFrame{Header: hdr, InstanceID: inst.id, Command: cmd, TaskID: t.rec.TaskID}
		}
		if err := trySend(c, fr); err != nil {
			// The rejection is recorded (revising, its feedback pending):
			// it is sent again after a reconnect, and the caller's
			// rejection stands.
			f.log.Warn().Err(err).Str("instance", inst.id).Str("task", t.rec.TaskID).Msg("task_reject not queued; it is sent again after a reconnect")
			return nil, errFeedbackDeferred
		}
		return nil, nil
	}
	return nil, fmt.Errorf("fleet: core asked for an unknown frame %q", e.Frame)
}

// persistLocked writes t (when not nil) and, when withInstance, inst's
// record in one transaction: a verdict or a review step is never stored
// half.
func (f *Fleet) persistLocked(t *task, inst *instance, withInstance bool) error {
	withInstance = withInstance && inst.id != "" // spawn states are not persisted
	if t == nil && !withInstance {
		return nil
	}
	var st serverstore.Task
	var si serverstore.Instance
	err := f.store.Update(func(tx *serverstore.Tx) error {
		var err error
		if t != nil {
			if st, err = tx.PutTask(t.rec); err != nil {
				return err
			}
		}
		if withInstance {
			si, err = tx.PutInstance(inst.rec)
		}
		return err
	})
	if err != nil {
		what := "instance " + inst.id
		if t != nil {
			what = "task " + t.rec.TaskID
		}
		f.log.Error().Err(err).Str("instance", inst.id).Msg("persist")
		return fmt.Errorf("fleet: store %s: %w", what, err)
	}
	if t != nil {
		t.rec = st
	}
	if withInstance {
		inst.rec = si
	}
	return nil
}
