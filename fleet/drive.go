package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
)

// The driver of the decision core (core.go): it builds the core's view of
// an instance from the fleet's records and carries out the core's plans.
//
// Nothing durable is written under f.mu. A plan's persist queues its
// records (copies) on the state store's write queue (serverstore.Queue),
// which commits them on its own goroutine in the order they were queued,
// several in one transaction: the order of the writes is the order of the
// decisions, made under f.mu. What a write licenses waits for it outside
// f.mu:
//
//   - a send the plan puts after a persist (Submit's prompt after the
//     task's record, a rejection's frame after the rejection): the plan
//     stops there (drive.rest), the caller releases f.mu, waits for the
//     write and carries the rest out under f.mu again (Fleet.finishStep),
//     unless the instance moved meanwhile (instance.gen);
//   - the answer to the caller: an SDK call waits for its plan's writes
//     (drive.writes) or the instance's latest (instance.written) after
//     releasing f.mu, and returns a write's error;
//   - the task_done_ack: onTaskDone queues the record and acks once it is
//     committed.
//
// Writes nobody waits for (state changes from frames) are logged when
// they fail. In the package's tests a wait for the disk while holding
// f.mu panics (lockcheck.go).

// viewLocked is the core's view of inst. f.mu must be held.
func (f *Fleet) viewLocked(inst *instance) coreView {
	v := coreView{Instance: inst.m.State(), TaskID: inst.openTask, RunStarted: inst.runStarted, ReplayIncomplete: inst.replayIncomplete,
		RunInFlight: inst.run != nil}
	if a := f.agents[inst.agent]; a != nil {
		v.Connected = a.conn != nil
		v.Pifleet = a.pifleet
		v.SpawnCancel = a.pifleet && a.announces(transport.CapabilitySpawnCancel)
	}
	v.Spawning, v.SpawnSent, v.Intent = inst.id == "", inst.spawnConn != nil, inst.intent
	if t := f.core.task(inst.openTask); t != nil {
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
	// run is the Run a prompt started; taskWrite is the write of the new
	// task (Submit undoes it when the send fails).
	run       *Run
	taskWrite *serverstore.Pending
	// td is the task_done a recorded input is about.
	td *serverstore.TaskDone
	// writes are the plan's queued writes, for the caller to wait for
	// outside f.mu.
	writes []*serverstore.Pending
	// resumable: the caller carries on a plan stopped before a send that
	// must follow a write (finishStep); rest is that part of the plan,
	// task its task, and gen the instance's gen when it stopped.
	resumable bool
	rest      []effect
	task      *task
	gen       uint64
	// A spawn's: its frame, the answer's worker, the progress frame, and
	// the caller's error when it gave the spawn up (drivespawn.go).
	spawnFrame *transport.SpawnFrame
	spawned    *transport.InstanceInfo
	progress   *transport.SpawnProgressFrame
	spawnCause error
	// noSpawnCancel: the spawn_cancel could not be queued; the spawn is
	// stopped without it (its worker once spawned).
	noSpawnCancel bool
}

// stepLocked decides in and carries the plan out. ok is false when the
// core refused the input in the instance's state.
func (f *Fleet) stepLocked(d *drive, in coreInput) (w *waiter, after []func(), ok bool, err error) {
	v := f.viewLocked(d.inst)
	if d.noSpawnCancel {
		v.SpawnCancel = false
	}
	plan, ok := decide(v, in)
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
	t := d.task
	if t == nil {
		t = f.core.task(inst.openTask)
	}
	for i, e := range plan {
		switch e.Kind {
		case fxInstance:
			f.transitionLocked(inst, e.Event)
		case fxTask:
			if t != nil {
				f.fireTaskLocked(t, e.TaskEvent)
			}
		case fxOpen:
			t = d.newTask
			f.core.addTask(t)
			inst.openTask = e.TaskID
			inst.gen++
		case fxDetach:
			inst.openTask = ""
			inst.gen++
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
		case fxPersist, fxIntent:
			var p *serverstore.Pending
			if e.Kind == fxIntent {
				p = f.queueSpawnIntentLocked(inst)
			} else {
				var pt *task
				if e.Task {
					pt = t
				}
				if p = f.persistLocked(pt, inst, e.Instance); p != nil && pt != nil && pt == d.newTask {
					d.taskWrite = p
				}
			}
			if p == nil {
				break
			}
			d.writes = append(d.writes, p)
			if !sendFollows(plan[i+1:]) {
				break
			}
			if d.resumable {
				d.rest, d.task, d.gen = plan[i+1:], t, inst.gen
				return w, after, nil
			}
			// A caller that cannot wait outside f.mu (none should ask
			// for this; the lock check of the tests catches it).
			if err := f.waitWritten(p); err != nil {
				return w, after, err
			}
		case fxDone:
			if dt := f.core.task(e.TaskID); dt != nil && d.td != nil {
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
			f.endUILocked(inst)
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
		default:
			if fn := f.applySpawnLocked(d, e); fn != nil {
				after = append(after, fn)
			}
		}
	}
	return w, after, nil
}

// sendFollows reports whether rest queues a frame that must wait for the
// write before it.
func sendFollows(rest []effect) bool {
	for _, e := range rest {
		if e.Kind == fxSend && !e.Free {
			return true
		}
	}
	return false
}

// noWait is the context of a step carried out on an agent's read loop,
// which must not wait for room in that agent's send queue.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// errInstanceMoved: the instance changed while its plan waited for a
// write outside f.mu; the rest of the plan was not carried out.
var errInstanceMoved = errors.New("fleet: the instance changed meanwhile")

// finishStep carries a step out once f.mu is released: it waits for the
// plan's writes and, when the plan stopped before a send that must follow
// them, carries the rest out under f.mu again, unless the instance moved
// meanwhile (errInstanceMoved). It returns the first write's error, and
// the stop waiter and after-functions of the rest, if any. A send in the
// rest waits for room in the agent's send queue with f.mu released, as
// long as ctx allows: the queue may have filled while the write waited,
// and a rejection's frame would otherwise wait for the next reconnect of
// a live connection. f.mu must not be held.
func (f *Fleet) finishStep(ctx context.Context, d *drive) (w *waiter, after []func(), err error) {
	for {
		if werr := f.waitWrites(d); werr != nil && err == nil {
			err = werr
		}
		if err != nil || d.rest == nil {
			return w, after, err
		}
		rest := d.rest
		d.rest = nil
		f.mu.Lock()
		for d.c != nil && sendFollows(rest) && !d.c.HasRoom() && d.inst.gen == d.gen {
			f.mu.Unlock()
			rerr := d.c.AwaitRoom(ctx) // a closed connection fails the send below
			f.mu.Lock()
			if rerr != nil {
				break
			}
		}
		if d.inst.gen != d.gen {
			f.mu.Unlock()
			return w, after, errInstanceMoved
		}
		w2, after2, aerr := f.applyLocked(d, rest)
		f.mu.Unlock()
		if w2 != nil {
			w = w2
		}
		after = append(after, after2...)
		if aerr != nil {
			err = aerr
		}
	}
}

// waitWrites waits for the plan's queued writes and returns the first
// one's error (f.mu must not be held).
func (f *Fleet) waitWrites(d *drive) (err error) {
	writes := d.writes
	d.writes = nil
	for _, p := range writes {
		if werr := f.waitWritten(p); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// waitWritten waits for a queued write (f.mu must not be held).
func (f *Fleet) waitWritten(p *serverstore.Pending) error {
	if p == nil {
		return nil
	}
	return p.Wait()
}

// queueLocked queues a write on the state store; then (not nil) hears a
// failure. f.mu is held: the queue's order is the order of the decisions.
func (f *Fleet) queueLocked(fn func(*serverstore.Tx) error, onErr func(error)) *serverstore.Pending {
	return f.store.Queue(fn, func(err error) {
		if err != nil && onErr != nil {
			onErr(err)
		}
	})
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
	case frUntracked:
		r, err := f.startRunLocked(inst, c, d.prompt, "", d.opts)
		d.run = r
		return nil, err
	case frAbort:
		return nil, f.sendAbortLocked(inst, c)
	case frStop:
		return f.sendStopLocked(inst, a, c)
	case frSpawn:
		return f.requestLocked(a, c, d.spawnFrame, f.spawnAnswer(inst))
	case frSpawnCancel:
		return nil, trySend(c, &transport.SpawnCancelFrame{Header: hdr, SpawnID: inst.spawnID})
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
		// The task's latest feedback: the plan recorded it before.
		if t == nil || len(t.rec.Feedback) == 0 {
			return nil, errors.New("fleet: no feedback to deliver")
		}
		text := t.rec.Feedback[len(t.rec.Feedback)-1].Text
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

// persistLocked queues the write of t (when not nil) and, when
// withInstance, inst's record in one transaction: a verdict or a review
// step is never stored half. It writes copies of the records as they are
// now, and returns the write (nil when there is nothing to write).
func (f *Fleet) persistLocked(t *task, inst *instance, withInstance bool) *serverstore.Pending {
	withInstance = withInstance && inst != nil && inst.id != "" // spawn states are not persisted
	if t == nil && !withInstance {
		return nil
	}
	var tr serverstore.Task
	var ir serverstore.Instance
	what, id := "", ""
	if withInstance {
		ir = inst.rec.Clone()
		what, id = "instance", inst.id
	}
	if t != nil {
		tr = t.rec.Clone()
		what, id = "task", t.rec.TaskID
		t.writes++
	}
	p := f.queueLocked(func(tx *serverstore.Tx) error {
		if t != nil {
			if _, err := tx.PutTask(tr); err != nil {
				return fmt.Errorf("fleet: store %s %s: %w", what, id, err)
			}
		}
		if withInstance {
			if _, err := tx.PutInstance(ir); err != nil {
				return fmt.Errorf("fleet: store %s %s: %w", what, id, err)
			}
		}
		return nil
	}, func(err error) {
		f.log.Error().Err(err).Str(what, id).Msg("persist")
	})
	if withInstance {
		inst.written = p
	}
	if h := testHookPersist.Load(); h != nil {
		(*h)(f, what, id)
	}
	return p
}

// testHookPersist, set by the package's tests, hears of every record
// write persistLocked queues (what is "task" or "instance") and of every
// task_done record onTaskDone queues ("task_done").
var testHookPersist atomic.Pointer[func(f *Fleet, what, id string)]
