package fleet

import (
	"encoding/json"
	"slices"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
)

// Version is the fleet's version, sent in its hello.
const Version = "0.1.0"

func hostPlatform() string { return bundle.HostPlatform() }

// handleFrame handles one frame of agent a's connection c, on c's handler
// goroutine (so frames of one agent are handled in order). Callbacks of
// the application (prompt progress) run after f.mu is released.
func (f *Fleet) handleFrame(a *agentState, c *transport.Conn, fr transport.Frame) {
	var after []func()
	f.mu.Lock()
	if a.conn != c && a.conn != nil {
		f.mu.Unlock()
		return // a frame of an older connection
	}
	if id := fr.Envelope().ID; id != "" {
		if w, ok := a.waiters[id]; ok && isAnswer(fr) {
			delete(a.waiters, id)
			if w.onAnswer != nil {
				w.onAnswer(fr)
			}
			w.ch <- fr
			f.mu.Unlock()
			return
		}
	}
	switch fr := fr.(type) {
	case *transport.EventFrame:
		after = f.onEventLocked(a, fr, nil, nil)
	case *rebuiltEvent:
		after = f.onEventLocked(a, fr.EventFrame, &fr.rec, fr.line)
	case *transport.TaskDoneFrame:
		f.mu.Unlock()
		f.onTaskDone(a, c, fr)
		return
	case *transport.SpawnProgressFrame:
		after = f.onSpawnProgressLocked(a, fr)
	case *transport.ExecOutputFrame:
		f.onExecOutputLocked(a, fr)
	case *transport.ExecExitFrame:
		f.onExecExitLocked(a, fr)
	case *transport.UIRequestFrame:
		f.onUIRequestLocked(a, c, fr)
	case *transport.UIEndedFrame:
		f.onUIEndedLocked(a, fr)
	case *transport.WorkerExitedFrame:
		f.onWorkerExitedLocked(a, fr)
	case *transport.TaskEscalatedFrame:
		f.publishLocked(Change{Kind: ChangeEscalated, Agent: a.name, InstanceID: fr.InstanceID, TaskID: fr.TaskID,
			Message: "worker dialog unanswered: " + fr.Reason})
	case *transport.ModelDriftFrame:
		if inst := f.core.instance(fr.InstanceID); inst != nil && inst.agent == a.name {
			m := serverstore.ModelRef{Provider: fr.Actual.Provider, ID: fr.Actual.ID, Thinking: fr.Actual.Thinking}
			if !fr.Refused {
				inst.rec.Model = &m
				f.persistInstanceLocked(inst)
			}
			f.publishLocked(Change{Kind: ChangeModelDrift, Agent: a.name, InstanceID: fr.InstanceID,
				Message: fr.Expected.Provider + "/" + fr.Expected.ID + " → " + fr.Actual.Provider + "/" + fr.Actual.ID})
		}
	case *transport.SessionsReportFrame:
		r := session.Report{Machine: a.name, Full: fr.Full, Sessions: sessionInfos(fr.Sessions)}
		if fr.Page != nil && fr.Pages != nil {
			r.Page, r.Pages = int(*fr.Page), int(*fr.Pages)
		}
		after = append(after, f.onSessionsLocked(a, r)...)
	case *transport.SessionsRemovedFrame:
		after = append(after, f.onSessionsLocked(a, session.Report{Machine: a.name, Removed: fr.Paths})...)
	case *transport.SpawnedFrame:
		// The answer to a spawn whose caller gave up (timeout): nobody
		// tracks the worker, so it is stopped rather than left running.
		f.log.Warn().Str("agent", a.name).Str("instance", fr.Instance.InstanceID).Msg("late spawned answer; stopping the untracked worker")
		_ = c.TrySend(&transport.StopFrame{InstanceID: fr.Instance.InstanceID})
	case *transport.HelloFrame:
		// A second hello: ignored, as the reference does.
	case *transport.AuthProofFrame:
		// The agent's proof, checked before establishing on the
		// connections that need it (agents that dial in).
	case *transport.ErrorFrame:
		f.log.Warn().Str("agent", a.name).Str("code", fr.Code).Str("message", fr.Message).Msg("agent reported an error")
	default:
		f.log.Debug().Str("agent", a.name).Str("type", fr.FrameType()).Msg("unsolicited frame ignored")
	}
	f.mu.Unlock()
	for _, fn := range after {
		fn()
	}
}

// isAnswer reports whether fr can answer a waiting request.
func isAnswer(fr transport.Frame) bool {
	switch fr.(type) {
	case *transport.SpawnedFrame, *transport.SpawnErrorFrame, *transport.StoppedFrame, *transport.ErrorFrame,
		*transport.ExecStartedFrame:
		return true
	}
	return false
}

// onEventLocked handles one worker line: responses resolve waiting rpc
// calls, events feed the instance's tally, tail and listeners, and
// agent_settled moves the machine. A rebuilt update comes parsed, with
// its line (fr.Event is nil): it is written out only when read.
func (f *Fleet) onEventLocked(a *agentState, fr *transport.EventFrame, parsed *pirpc.Record, line *streamdelta.Line) []func() {
	inst := f.core.instance(fr.InstanceID)
	if inst == nil || inst.agent != a.name {
		q := a.orphans[fr.InstanceID]
		if len(q) < maxOrphans && len(a.orphans) < maxOrphans {
			if line != nil {
				fr.Event = line.Bytes() // rare: events before the spawned answer
			}
			a.orphans[fr.InstanceID] = append(q, fr)
		}
		return nil
	}
	if seq, ok := eventSeq(fr); ok {
		if seq <= inst.rec.LastSeenEventSeq {
			return nil // replayed twice
		}
		// Kept in memory (and written with the record's next change), not
		// persisted per event: after a restart the tail is empty, and a
		// replay from an older seq only rebuilds it.
		inst.rec.LastSeenEventSeq = seq
	}
	if line == nil {
		line = streamdelta.WholeLine(fr.Event) // the decoder's own copy: the frame is ours
	}
	inst.appendTail(line)
	// The transport decoder validated the event: parse without a second
	// validating pass (or not at all: a rebuilt update comes parsed).
	var rec pirpc.Record
	if parsed != nil {
		rec = *parsed
	} else {
		var err error
		if rec, err = pirpc.ParseValidRecord(fr.Event); err != nil {
			return nil
		}
	}
	if r := rec.Response; r != nil {
		if r.Command == "get_state" && r.Success {
			var st pirpc.State
			if r.Decode(&st) == nil {
				inst.snapshot = &st
				inst.snapshotAt = f.cfg.Now()
			}
		}
		if w, ok := inst.rpcWait[r.ID]; ok && r.ID != "" {
			delete(inst.rpcWait, r.ID)
			w <- rpcResult{resp: r}
		}
		return nil
	}
	ev := rec.Event
	if ev == nil {
		return nil
	}
	if u := ev.UIRequest; ev.Type == pirpc.EventExtensionUIRequest && u != nil && u.Timeout > 0 && u.ID != "" {
		// pi answers this dialog itself once its timeout passes (the
		// agent's ui_request follows this event and carries no timeout).
		if len(inst.uiDeadline) < maxOrphans {
			inst.uiDeadline[u.ID] = f.cfg.Now().Add(time.Duration(u.Timeout * float64(time.Millisecond)))
		}
	}
	if ev.Type == pirpc.EventAgentStart {
		inst.runStarted = true
	}
	before := inst.tally.Cost
	inst.tally.Observe(ev)
	inst.cost += inst.tally.Cost - before
	inst.activity = activityOf(ev)
	inst.activityAt = f.cfg.Now()
	we := Event{InstanceID: inst.id, Agent: a.name, Type: string(ev.Type), At: inst.activityAt, line: line}
	f.publishLocked(Change{Kind: ChangeEvent, Agent: a.name, InstanceID: inst.id, TaskID: inst.openTask,
		Event: we.Type, WorkerEvent: &we})
	var after []func()
	for _, l := range inst.listeners {
		after = append(after, func() { l(we) })
	}
	if ev.Type == pirpc.EventAgentSettled {
		after = append(after, f.onSettledLocked(inst))
		agent, id := a.name, inst.id
		after = append(after, func() { f.scheduleCatchUp(agent, f.cfg.MirrorDelay, id) })
	}
	return after
}

func activityOf(ev *pirpc.Event) string {
	switch {
	case ev.Tool != nil && ev.Type == pirpc.EventToolExecutionStart:
		return "tool " + ev.Tool.ToolName
	case ev.Type == pirpc.EventMessageUpdate:
		return "writing"
	default:
		return string(ev.Type)
	}
}

// onSettledLocked: the worker's run is over (seed §1: running → idle for
// an untracked run, aborting → idle after an abort); waiting prompts get
// the last assistant text.
func (f *Fleet) onSettledLocked(inst *instance) func() {
	_, after, _, err := f.stepLocked(f.driveLocked(inst), coreInput{Kind: inSettled})
	if err != nil {
		f.log.Error().Err(err).Str("instance", inst.id).Msg("settle")
	}
	return func() {
		for _, fn := range after {
			fn()
		}
	}
}

// onTaskDone records a task_done durably, fires taskDone when it closes
// the instance's open task, acks it, and queues the application's
// notification (at least once, keyed by TaskReport.Key).
func (f *Fleet) onTaskDone(a *agentState, c *transport.Conn, fr *transport.TaskDoneFrame) {
	td := serverstore.TaskDone{
		TaskID: fr.TaskID, InstanceID: fr.InstanceID, Seq: fr.Seq, Status: string(fr.Status),
		Summary: fr.Summary, LastAssistantMessage: fr.LastAssistantMessage, TraceID: fr.TraceID,
	}
	if s := fr.Stats; s != nil {
		td.Stats = &serverstore.TaskStats{Turns: s.Turns, ToolCalls: s.ToolCalls, FilesChanged: s.FilesChanged, Cost: s.Cost}
	}
	if w := fr.Worktree; w != nil {
		td.Worktree = &serverstore.DiffStat{Branch: w.Branch, Base: w.Base, Files: int(w.Files), Insertions: int(w.Insertions), Deletions: int(w.Deletions)}
	}
	// Decide under the lock, record without it: the record's fsync must
	// not hold up every other agent and SDK call. The record is queued
	// under the lock, after every change of the task's or instance's
	// state decided before it, and checks the stored states and moves
	// them only if nothing moved them: a change decided after it (queued
	// after it) lands after it. The memory follows that outcome under the
	// lock again.
	f.mu.Lock()
	inst := f.core.instance(fr.InstanceID)
	if inst != nil && inst.agent != a.name {
		inst = nil // another agent's instance: the report is recorded, nothing moves
	}
	t := f.core.task(fr.TaskID)
	var taskWrites uint64
	if t != nil {
		taskWrites = t.writes
	}
	review := false
	var fallback serverstore.Task // never a blank record: the fleet's own copy if the store lost it
	var taskNext TaskState
	if inst != nil {
		plan, _ := decide(f.viewLocked(inst), coreInput{Kind: inTaskDone, TaskID: fr.TaskID})
		review = len(plan) == 1 && plan[0].Kind == fxRecord && plan[0].Review
		if review {
			fallback = t.rec.Clone()
			taskNext, _ = TaskTable.Next(t.m.State(), TaskEventDone)
		}
	}
	branch := ""
	if inst != nil && inst.rec.Worktree != nil && fr.Worktree != nil && inst.rec.Worktree.Branch != fr.Worktree.Branch {
		branch = fr.Worktree.Branch // the worktree's branch is named after its first task
	}
	moved := false // the record moved the task and the instance to awaiting_review
	rcp, recorded := f.store.QueueTaskDone(td.Clone(), func(tx *serverstore.Tx) error {
		moved = false // (the function may run again, alone)
		if inst == nil || (!review && branch == "") {
			return nil
		}
		ir, iok, err := tx.Instance(inst.id)
		if err != nil {
			return err
		}
		if review {
			rec := fallback
			cur, ok, err := tx.Task(fr.TaskID)
			if err != nil {
				return err
			}
			if ok {
				rec = cur
			} else {
				done := td
				rec.LastDone = &done
			}
			if TaskState(rec.State) == TaskRunning && (!iok || reachabilityState(InstanceState(ir.State))) {
				rec.State = string(taskNext)
				if _, err := tx.PutTask(rec); err != nil {
					return err
				}
				moved = true
			}
		}
		if !iok {
			return nil
		}
		if moved {
			ir.State = string(StateAwaitingReview)
		}
		if branch != "" && ir.Worktree != nil {
			ir.Worktree.Branch = branch
		}
		if moved || branch != "" {
			_, err = tx.PutInstance(ir)
		}
		return err
	}, nil)
	if h := testHookPersist.Load(); h != nil {
		(*h)(f, "task_done", td.Key().String())
	}
	f.mu.Unlock()
	if err := recorded.Wait(); err != nil {
		f.log.Error().Err(err).Str("task", fr.TaskID).Msg("task_done not recorded; not acked (the agent re-sends)")
		return
	}
	rc := *rcp
	f.mu.Lock()
	if branch != "" && inst.rec.Worktree != nil {
		inst.rec.Worktree.Branch = branch
	}
	var after []func()
	var d *drive
	if inst != nil {
		d = &drive{inst: inst, a: a, c: c, td: &td}
		var err error
		_, after, _, err = f.stepLocked(d, coreInput{Kind: inRecorded, TaskID: fr.TaskID, Duplicate: rc.Duplicate, Review: moved})
		if err != nil {
			f.log.Error().Err(err).Str("task", fr.TaskID).Msg("task_done recorded; instance state not stored")
		}
	} else if t != nil && !rc.Duplicate {
		if t.rec.InstanceID == td.InstanceID {
			t.rec.LastDone = &td
		}
		t.markDoneLocked()
	}
	var rewrite *serverstore.Pending
	if t != nil && !rc.Duplicate && t.writes != taskWrites && t.rec.InstanceID == td.InstanceID {
		// The task was written from the fleet's copy while the record
		// waited (an abort, say), and that write, queued after the
		// record, lands after it without the report: write the task
		// again, with it.
		rewrite = f.persistTaskLocked(t)
	}
	f.mu.Unlock()
	if err := f.waitWritten(rewrite); err != nil {
		f.log.Error().Err(err).Str("task", fr.TaskID).Msg("task_done recorded; its task's record not rewritten with it")
	}
	if d != nil {
		// What the record's outcome wrote is durable before the ack too.
		if _, _, err := f.finishStep(noWait, d); err != nil {
			f.log.Error().Err(err).Str("task", fr.TaskID).Msg("task_done recorded; instance state not stored")
		}
	}
	for _, fn := range after {
		fn()
	}
	if err := c.TrySend(&transport.TaskDoneAckFrame{Header: transport.Header{TraceID: fr.TraceID}, TaskID: fr.TaskID, Seq: fr.Seq}); err != nil {
		f.log.Warn().Err(err).Str("task", fr.TaskID).Msg("task_done_ack not sent; the agent re-sends")
	}
	if rc.Duplicate {
		f.log.Debug().Str("key", rc.Key.String()).Msg("duplicate task_done acked")
		return
	}
	f.enqueueReport(td, rc.Order)
}

func num(p *float64) int64 {
	if p == nil {
		return 0
	}
	return int64(*p)
}

// onSessionsLocked applies a sessions report to the agent's projection
// and persists it. Once a full report made the projection synced, the
// sessions of the agent's workers are caught up (entries written while
// the server was away, AC-3.5.7) and its baselines' HEADs checked; it
// returns what does that, to run outside the lock.
func (f *Fleet) onSessionsLocked(a *agentState, r session.Report) []func() {
	p := f.sessions.projection(a.name)
	if _, err := p.ApplyReport(r); err != nil {
		f.log.Warn().Err(err).Str("agent", a.name).Msg("sessions report refused")
		return nil
	}
	if st, _ := p.State(a.name); r.Full && st != session.StateSynced {
		return nil // more pages to come
	}
	f.publishLocked(Change{Kind: ChangeSessions, Agent: a.name})
	if !r.Full {
		// Not persisted: what the agent reports is reported again in full
		// on the next connection; the server's own fields are persisted
		// when they change.
		return nil
	}
	f.sessions.persist(a.name)
	name := a.name
	return []func(){f.catchUpAgentLocked(name), func() { f.refreshBaselinesAsync(name) }}
}

// refreshBaselinesAsync checks the HEADs of the agent's baselines in the
// background.
func (f *Fleet) refreshBaselinesAsync(agent string) {
	f.mu.Lock()
	if f.state != lifeStarted {
		f.mu.Unlock()
		return
	}
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		f.RefreshBaselines(f.ctx, agent)
	}()
}

func sessionInfos(in []transport.SessionInfo) []session.SessionInfo {
	out := make([]session.SessionInfo, 0, len(in))
	for _, s := range in {
		out = append(out, session.SessionInfo{
			SessionID: s.SessionID, Path: s.Path, Name: s.Name, Cwd: s.Cwd, Kind: session.Kind(s.Kind),
			Pinned: s.Pinned, ParentSession: s.ParentSession, Bundle: s.Bundle, BundleHash: s.BundleHash,
			GitHead: s.GitHead, TaskIDs: s.TaskIDs, Labels: s.Labels, UpdatedAt: session.Millis(s.UpdatedAt),
			AttachedInstanceID: s.AttachedInstanceID,
		})
	}
	return out
}

// Sessions returns the session inventory the agent name last reported.
func (f *Fleet) Sessions(name string) []session.Record {
	p := f.sessions.lookup(name)
	if p == nil {
		return nil
	}
	return p.Sessions(name)
}

// onUIRequestLocked answers a worker dialog from the bundle's
// ui.autoAnswer (matched on the title), or keeps it for the application
// (AnswerUI) and tells subscribers.
func (f *Fleet) onUIRequestLocked(a *agentState, c *transport.Conn, fr *transport.UIRequestFrame) {
	inst := f.core.instance(fr.InstanceID)
	if inst == nil {
		return
	}
	for _, aa := range inst.autoAnswer {
		if aa.Key != fr.Title {
			continue
		}
		var v any = aa.Text
		if aa.Bool != nil {
			v = *aa.Bool
		}
		raw, _ := json.Marshal(v)
		_ = c.TrySend(&transport.UIResponseFrame{Header: transport.Header{TraceID: inst.rec.TraceID},
			InstanceID: fr.InstanceID, RequestID: fr.RequestID, Value: raw})
		f.log.Info().Str("instance", inst.id).Str("title", fr.Title).Msg("worker dialog answered by policy")
		return
	}
	req := &UIRequest{InstanceID: fr.InstanceID, RequestID: fr.RequestID, Kind: string(fr.Kind), Title: fr.Title,
		Message: fr.Message, Options: append([]string(nil), fr.Options...), At: f.cfg.Now(),
		Deadline: inst.uiDeadline[fr.RequestID]}
	delete(inst.uiDeadline, fr.RequestID)
	inst.ui[fr.RequestID] = req
	inst.forgetEndedUILocked(f.cfg.Now())
	f.publishLocked(Change{Kind: ChangeUIRequest, Agent: a.name, InstanceID: inst.id, TaskID: inst.openTask, UI: req})
}

// onUIEndedLocked handles an agent's word that a dialog ended without an
// answer (its time ran out, or the worker that asked is gone): it is no
// longer pending, and subscribers are told, so that a watch or a page
// stops offering it. It stays known until answered, so that a late answer
// is told why it is too late, while it is among the latest
// maxEndedDialogs that ended.
func (f *Fleet) onUIEndedLocked(a *agentState, fr *transport.UIEndedFrame) {
	inst := f.core.instance(fr.InstanceID)
	if inst == nil || inst.agent != a.name {
		return
	}
	u := inst.ui[fr.RequestID]
	if u == nil || u.ended != "" {
		return // answered already, or told twice
	}
	u.ended = fr.Reason
	ended := *u
	inst.forgetEndedUILocked(f.cfg.Now())
	f.publishLocked(Change{Kind: ChangeUIEnded, Agent: a.name, InstanceID: inst.id, TaskID: inst.openTask, UI: &ended,
		Message: ended.endText()})
}

// maxEndedDialogs bounds the dialogs an instance remembers after they
// ended without an answer: enough for a late answer to be told why it is
// too late, however many questions a long-lived worker asks.
const maxEndedDialogs = 16

// UIRequest is a worker dialog waiting for an answer (AnswerUI).
type UIRequest struct {
	InstanceID, RequestID string
	// Kind is confirm, select or input.
	Kind, Title, Message string
	Options              []string
	At                   time.Time
	// Deadline is when pi answers the dialog itself (its own timeout);
	// zero when it waits. A dialog past it is no longer pending.
	Deadline time.Time
	// ended says why the dialog ended without an answer, as its agent
	// reported (ui_ended); "" while it waits.
	ended transport.UIEndReason
}

// expired reports whether the dialog can no longer be answered: its agent
// said it ended, or pi answered it itself by now.
func (u *UIRequest) expired(now time.Time) bool {
	return u.ended != "" || !u.Deadline.IsZero() && !now.Before(u.Deadline)
}

// endText says in words how a dialog that can no longer be answered
// ended.
func (u *UIRequest) endText() string {
	if u.ended == transport.UIEndCancelled {
		return "the worker process that asked is gone (restarted)"
	}
	return "its time ran out; the worker went on with its default answer"
}

// forgetEndedUILocked forgets the oldest of the instance's dialogs that
// ended without an answer beyond the latest maxEndedDialogs.
func (inst *instance) forgetEndedUILocked(now time.Time) {
	var ended []*UIRequest
	for _, u := range inst.ui {
		if u.expired(now) {
			ended = append(ended, u)
		}
	}
	if len(ended) <= maxEndedDialogs {
		return
	}
	slices.SortFunc(ended, func(a, b *UIRequest) int { return a.At.Compare(b.At) })
	for _, u := range ended[:len(ended)-maxEndedDialogs] {
		delete(inst.ui, u.RequestID)
	}
}

// endUILocked ends the dialogs of an instance that ended: nobody can
// answer them any more. Subscribers are told of those still pending, as
// for a worker process gone (ui_ended cancelled), and every dialog of the
// instance is forgotten.
func (f *Fleet) endUILocked(inst *instance) {
	for _, u := range inst.pendingUILocked(f.cfg.Now()) {
		u.ended = transport.UIEndCancelled
		f.publishLocked(Change{Kind: ChangeUIEnded, Agent: inst.agent, InstanceID: inst.id, TaskID: inst.openTask, UI: &u,
			Message: u.endText()})
	}
	clear(inst.ui)
	clear(inst.uiDeadline)
}

// pendingUILocked returns the instance's dialogs still waiting for an
// answer: not those pi resolved by its own timeout (they stay in inst.ui,
// so that an answer to one is told why it is too late).
func (inst *instance) pendingUILocked(now time.Time) []UIRequest {
	var out []UIRequest
	for _, u := range inst.ui {
		if !u.expired(now) {
			out = append(out, *u)
		}
	}
	slices.SortFunc(out, func(a, b UIRequest) int { return a.At.Compare(b.At) })
	return out
}
