package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
	"example.com/pifleet/transport/trust"
)

// fleetBackend is the control API over a running fleet: the adapter from
// the fleet SDK's types and errors to the API's.
type fleetBackend struct {
	f *fleet.Fleet
	// doctor runs the server's health checks.
	doctor func(ctx context.Context, st fleet.Status) []controlapi.Check
	// watchBuffer is each watch's subscription buffer.
	watchBuffer int
	// searchTimeout bounds one agent's session search
	// (transport.DefaultRequestTimeout when zero).
	searchTimeout time.Duration
}

var _ controlapi.Backend = (*fleetBackend)(nil)

// apiError maps the fleet's errors to the API's codes; the original text
// is kept as the message.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	code := controlapi.CodeInternal
	var detail string
	var spawnErr *fleet.SpawnError
	var rebundleErr *fleet.RebundleError
	var platformErr *bundle.PlatformError
	var hashErr *bundle.HashPinError
	var fileErr *fleet.FileError
	var execErr *fleet.ExecError
	var deliveryErr *fleet.DeliveryError
	var piErr *pirpc.CommandError
	var refused *fleet.AgentRefusedError
	switch {
	case errors.As(err, &refused):
		return &controlapi.Error{Code: controlapi.CodeAgentRefused, Message: err.Error() + "; " + trustHint(refused.Agent)}
	case errors.As(err, &piErr):
		code = controlapi.CodeWorkerRefused
	case errors.As(err, &deliveryErr):
		code, detail = controlapi.CodeDeliveryFailed, deliveryErr.Code
	case errors.As(err, &execErr):
		code, detail = controlapi.CodeExecRefused, execErr.Code
	case errors.Is(err, fleet.ErrUnknownExecution):
		code = controlapi.CodeUnknownExecution
	case errors.As(err, &spawnErr):
		code, detail = controlapi.CodeSpawnError, spawnErr.Code
	case errors.As(err, &platformErr):
		// Checked before any frame is sent; the agent would have said
		// the same.
		code, detail = controlapi.CodeSpawnError, "platform_mismatch"
	case errors.As(err, &hashErr):
		// Checked against the registry before any frame; an agent that
		// checks the pin answers the same code.
		code, detail = controlapi.CodeSpawnError, "bundle_hash_mismatch"
	case errors.As(err, &rebundleErr):
		code, detail = controlapi.CodeRebundleFailed, rebundleErr.Code
	case errors.Is(err, fleet.ErrUnknownInstance):
		code = controlapi.CodeUnknownInstance
	case errors.Is(err, fleet.ErrUnknownTask):
		code = controlapi.CodeUnknownTask
	case errors.Is(err, fleet.ErrUnknownAgent):
		code = controlapi.CodeUnknownAgent
	case errors.Is(err, fleet.ErrUIRequestExpired):
		code = controlapi.CodeInvalidState
	case errors.Is(err, fleet.ErrUnknownUIRequest):
		code = controlapi.CodeUnknownUIRequest
	case errors.Is(err, fleet.ErrUnknownSession):
		code = controlapi.CodeUnknownSession
	case errors.Is(err, fleet.ErrSessionPinned):
		code = controlapi.CodeSessionPinned
	case errors.Is(err, fleet.ErrSessionBusy):
		code = controlapi.CodeSessionBusy
	case errors.Is(err, fleet.ErrModelPinned):
		code = controlapi.CodeModelPinned
	case errors.Is(err, bundle.CodeNotFound):
		code = controlapi.CodeUnknownBundle
	case errors.Is(err, trust.ErrPolicyRefused), errors.Is(err, trust.ErrRefused):
		code = controlapi.CodePolicyRefused
	case errors.Is(err, fleet.ErrWorkerGone):
		code = controlapi.CodeWorkerGone
	case errors.Is(err, fleet.ErrInvalidState), errors.Is(err, fleet.ErrInstanceEnded):
		code = controlapi.CodeInvalidState
	case errors.Is(err, fleet.ErrNotConnected):
		code = controlapi.CodeNotConnected
	case errors.Is(err, fleet.ErrNotSupported):
		code = controlapi.CodeNotSupported
	case errors.Is(err, fleet.ErrClosed):
		code = controlapi.CodeUnavailable
	case errors.Is(err, fleet.ErrInvalidConfig), errors.Is(err, fleet.ErrBadDisposition), errors.Is(err, fleet.ErrBadDeliveryMode),
		errors.Is(err, trust.ErrBadMachine), errors.Is(err, trust.ErrBadPolicy), errors.Is(err, session.ErrInvalidName):
		code = controlapi.CodeBadRequest
	case errors.As(err, &fileErr) && (fileErr.Code == "not_found" || fileErr.Code == "path_escape"):
		// The control API serves no files: such an answer is about a
		// directory the request named (a baseline's cwd).
		code, detail = controlapi.CodeBadRequest, fileErr.Code
	}
	return &controlapi.Error{Code: code, Message: err.Error(), Detail: detail}
}

// trustHint says how an operator admits an agent that trust refused.
func trustHint(agent string) string {
	return fmt.Sprintf("to admit it, run `pifleet-server trust set %s steer` (or allow), then `pifleet-server retry %s`", agent, agent)
}

func (b *fleetBackend) instance(id string) (*fleet.Instance, error) {
	in, err := b.f.Instance(id)
	return in, apiError(err)
}

func (b *fleetBackend) task(id string) (*fleet.Task, error) {
	t, err := b.f.Task(id)
	return t, apiError(err)
}

// statusHeadCheck bounds the check of the baselines' HEADs before a
// status: the snapshot is not held up by a slow agent (its baselines keep
// the flag of the last check).
const statusHeadCheck = 2 * time.Second

// Status converts the fleet's snapshot, baselines' stale flags checked
// first.
func (b *fleetBackend) Status(ctx context.Context) (controlapi.Status, error) {
	hctx, cancel := context.WithTimeout(ctx, statusHeadCheck)
	b.f.RefreshBaselines(hctx, "")
	cancel()
	return statusOf(b.f.Status(ctx)), nil
}

func statusOf(st fleet.Status) controlapi.Status {
	out := controlapi.Status{Agents: []controlapi.Agent{}, Instances: []controlapi.Instance{}, Tasks: []controlapi.Task{},
		Baselines: []controlapi.Session{}}
	for _, a := range st.Agents {
		out.Agents = append(out.Agents, controlapi.Agent{Name: a.Name, Addresses: a.Addresses, Source: a.Source,
			State: string(a.State), Machine: a.Machine, User: a.User, Policy: string(a.Policy), Platform: a.Platform,
			Version: a.Version, MaxWorkers: a.MaxWorkers, Addr: a.Addr, ConnectedAt: timePtr(a.ConnectedAt), LostAt: timePtr(a.LostAt), LastError: a.LastError})
	}
	for _, in := range st.Instances {
		ci := controlapi.Instance{ID: in.InstanceID, Agent: in.Agent, Cwd: in.Cwd, State: string(in.State), Bundle: in.Bundle,
			BundleHash: in.BundleHash, ModelPinned: in.ModelPinned, Degraded: in.Degraded, TraceID: in.TraceID, OpenTask: in.OpenTask, Activity: in.Activity,
			ActivityAt: timePtr(in.ActivityAt), Cost: in.Cost, EndReason: in.EndReason, Session: in.SessionRef,
			FromSession: in.FromSession, SessionMode: controlapi.SessionMode(in.SessionMode), StaleBaseline: in.StaleBaseline}
		if ci.FromSession != "" && ci.SessionMode == "" {
			ci.SessionMode = controlapi.SessionClone // the fleet records clone as absent
		}
		if in.Model != nil {
			ci.Model = &controlapi.ModelRef{Provider: in.Model.Provider, ID: in.Model.ID, Thinking: in.Model.Thinking}
		}
		ci.Turns = in.Turns
		if b := in.Budget; b != nil {
			ci.Budget = &controlapi.Budget{MaxCost: b.MaxCost, MaxTurns: b.MaxTurns, MaxMinutes: b.MaxMinutes}
		}
		for _, u := range in.PendingUI {
			ci.PendingUI = append(ci.PendingUI, uiOf(u))
		}
		out.Instances = append(out.Instances, ci)
	}
	for _, t := range st.Tasks {
		out.Tasks = append(out.Tasks, taskOf(t))
	}
	for _, v := range st.Baselines {
		out.Baselines = append(out.Baselines, sessionOf(v))
	}
	return out
}

// sessionOf converts a session of the registry (as the fleet shows it: a
// fresh clone still under its baseline's name is a task there).
func sessionOf(v fleet.SessionView) controlapi.Session {
	info := v.Info() // pinned by the agent or by the server
	s := controlapi.Session{Machine: v.Machine, SessionID: v.SessionID, Path: v.Path, Name: v.Name, Cwd: v.Cwd,
		Kind: controlapi.SessionKind(v.Kind), Pinned: info.Pinned, ParentSession: v.ParentSession, Bundle: v.Bundle,
		BundleHash: v.BundleHash, GitHead: v.GitHead, TaskIDs: info.TaskIDs, Labels: info.Labels,
		AttachedInstanceID: v.AttachedInstanceID, Registry: string(v.Registry), StaleBaseline: v.StaleBaseline,
		CurrentHead: v.CurrentHead}
	if v.UpdatedAt != 0 {
		s.UpdatedAt = v.UpdatedAt.Time().UTC()
	}
	return s
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func uiOf(u fleet.UIRequest) controlapi.UIRequest {
	return controlapi.UIRequest{ID: u.RequestID, InstanceID: u.InstanceID, Kind: u.Kind, Title: u.Title, Message: u.Message, Options: u.Options, At: u.At,
		Deadline: timePtr(u.Deadline)}
}

func taskOf(t fleet.TaskInfo) controlapi.Task {
	ct := controlapi.Task{ID: t.TaskID, InstanceID: t.InstanceID, Agent: t.Agent, Prompt: t.Prompt, TraceID: t.TraceID,
		State: string(t.State), Rejects: t.Rejects, MaxRejects: t.MaxRejects, Verdict: t.Verdict}
	for _, fb := range t.Feedback {
		ct.Feedback = append(ct.Feedback, controlapi.Feedback{At: fb.At, Text: fb.Text, By: fb.By})
	}
	if d := t.LastDone; d != nil {
		ct.LastDone = &controlapi.TaskDone{Seq: d.Seq, Status: d.Status, Summary: d.Summary, LastAssistantMessage: d.LastAssistantMessage}
	}
	worktreeFieldsOf(&ct, t)
	return ct
}

// progressBuffer is how many spawn steps wait for a slow client before
// the oldest are skipped.
const progressBuffer = 64

// Spawn spawns and forwards the agent's progress.
func (b *fleetBackend) Spawn(ctx context.Context, req controlapi.SpawnRequest, progress func(controlapi.SpawnProgress)) (controlapi.SpawnResult, error) {
	opts := fleet.SpawnOptions{PinnedHash: req.PinnedHash, FromSession: req.FromSession,
		SessionMode: transport.SessionMode(req.SessionMode), Env: req.Env, TraceID: req.TraceID, Model: modelOf(req.Model)}
	if iso := req.Isolation; iso != nil {
		opts.Isolation = &fleet.Isolation{Branch: iso.Branch, Base: iso.Base}
	}
	return b.spawned(ctx, progress, func(onProgress func(fleet.SpawnProgress)) (*fleet.Instance, error) {
		opts.OnProgress = onProgress
		// A client that goes away does not abandon the spawn halfway: the
		// worker the agent starts is tracked like any other (the fleet
		// bounds the wait with its SpawnTimeout).
		opts.Agent, opts.Cwd, opts.Bundle = req.Agent, req.Cwd, req.Bundle
		return b.f.Spawn(context.WithoutCancel(ctx), opts)
	})
}

// Resume starts a worker on a session of the registry, like Spawn.
func (b *fleetBackend) Resume(ctx context.Context, req controlapi.ResumeRequest, progress func(controlapi.SpawnProgress)) (controlapi.SpawnResult, error) {
	opts := fleet.ResumeOptions{Mode: transport.SessionMode(req.Mode),
		Spawn: fleet.SpawnOptions{Agent: req.Machine, Bundle: req.Bundle, Env: req.Env, TraceID: req.TraceID, Model: modelOf(req.Model)}}
	return b.spawned(ctx, progress, func(onProgress func(fleet.SpawnProgress)) (*fleet.Instance, error) {
		opts.Spawn.OnProgress = onProgress
		return b.f.Resume(context.WithoutCancel(ctx), req.Session, opts)
	})
}

func modelOf(m *controlapi.ModelRef) *transport.ModelRef {
	if m == nil {
		return nil
	}
	return &transport.ModelRef{Provider: m.Provider, ID: m.ID, Thinking: m.Thinking}
}

// spawned runs spawn, forwarding its progress, and describes the new
// instance. The fleet calls OnProgress on the agent's frame goroutine,
// which must never wait for an HTTP client: steps go through a buffer, and
// when it is full a step is skipped (each step carries cumulative counts,
// so the next one makes up for it).
func (b *fleetBackend) spawned(ctx context.Context, progress func(controlapi.SpawnProgress),
	spawn func(onProgress func(fleet.SpawnProgress)) (*fleet.Instance, error)) (controlapi.SpawnResult, error) {
	steps := make(chan controlapi.SpawnProgress, progressBuffer)
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for p := range steps {
			progress(p)
		}
	}()
	var closeOnce sync.Once
	finish := func() { closeOnce.Do(func() { close(steps) }); <-forwarded }
	defer finish()
	var mu sync.Mutex // OnProgress must not send after finish closed steps
	done := false
	in, err := spawn(func(p fleet.SpawnProgress) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		select {
		case steps <- controlapi.SpawnProgress{Phase: p.Phase, Bundle: p.Bundle, BundleHash: p.BundleHash, Message: p.Message,
			FilesTotal: p.FilesTotal, FilesFetched: p.FilesFetched, FilesReused: p.FilesReused,
			BytesFetched: p.BytesFetched, BytesReused: p.BytesReused}:
		default:
		}
	})
	mu.Lock()
	done = true
	mu.Unlock()
	finish() // every step is forwarded before the answer
	if err != nil {
		return controlapi.SpawnResult{}, apiError(err)
	}
	res := controlapi.SpawnResult{InstanceID: in.ID(), SessionPath: in.SessionPath()}
	if o := in.Origin(); o != nil {
		res.FromSession, res.SessionMode, res.StaleBaseline = o.Source, controlapi.SessionMode(o.Mode), o.StaleBaseline
	}
	for _, is := range b.f.Status(ctx).Instances {
		if is.InstanceID == in.ID() {
			res.TraceID = is.TraceID
		}
	}
	return res, nil
}

// Prompt sends a prompt or a task, and waits when asked.
func (b *fleetBackend) Prompt(ctx context.Context, id string, req controlapi.PromptRequest) (controlapi.PromptResult, error) {
	in, err := b.instance(id)
	if err != nil {
		return controlapi.PromptResult{}, err
	}
	switch {
	case req.Task:
		t, err := in.Submit(ctx, req.Text, fleet.PromptOptions{})
		if err != nil {
			return controlapi.PromptResult{}, apiError(err)
		}
		res := controlapi.PromptResult{TaskID: t.ID()}
		if !req.Wait {
			return res, nil
		}
		info, err := t.Wait(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, apiError(fmt.Errorf("task %s did not finish: %w", t.ID(), err))
		}
		res.Settled = true
		if d := info.LastDone; d != nil {
			res.Reply = d.LastAssistantMessage
		}
		return res, nil
	case req.Wait:
		reply, err := in.Prompt(ctx, req.Text, fleet.PromptOptions{})
		return controlapi.PromptResult{Reply: reply, Settled: err == nil}, apiError(err)
	default:
		_, err := in.PromptAsync(ctx, req.Text, fleet.PromptOptions{})
		return controlapi.PromptResult{}, apiError(err)
	}
}

// Steer steers.
func (b *fleetBackend) Steer(ctx context.Context, id, text string) error {
	in, err := b.instance(id)
	if err != nil {
		return err
	}
	return apiError(in.Steer(ctx, text))
}

// Abort aborts.
func (b *fleetBackend) Abort(ctx context.Context, id string) error {
	in, err := b.instance(id)
	if err != nil {
		return err
	}
	return apiError(in.Abort(ctx))
}

// Stop stops.
func (b *fleetBackend) Stop(ctx context.Context, id string) error {
	in, err := b.instance(id)
	if err != nil {
		return err
	}
	return apiError(in.Stop(context.WithoutCancel(ctx))) // bounded by the fleet's request timeout
}

// Output converts the instance's output.
// transcriptCatchUp bounds the catch-up of the session mirror before a
// transcript: a slow agent leaves the mirror as it is.
const transcriptCatchUp = 3 * time.Second

// Transcript reads the mirror of the instance's session file.
func (b *fleetBackend) Transcript(ctx context.Context, id string, limit int) (controlapi.Transcript, error) {
	in, err := b.instance(id)
	if err != nil {
		return controlapi.Transcript{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, transcriptCatchUp)
	defer cancel()
	entries, more, err := in.Transcript(cctx, limit)
	if err != nil {
		return controlapi.Transcript{}, apiError(err)
	}
	return controlapi.Transcript{Entries: entries, Truncated: more}, nil
}

func (b *fleetBackend) Output(ctx context.Context, id string) (controlapi.Output, error) {
	in, err := b.instance(id)
	if err != nil {
		return controlapi.Output{}, err
	}
	o, err := in.Output(ctx)
	if err != nil {
		return controlapi.Output{}, apiError(err)
	}
	out := controlapi.Output{Tail: o.Tail, SnapshotAt: timePtr(o.SnapshotAt), LastAssistant: o.LastAssistant}
	if o.State != nil {
		if raw, err := json.Marshal(o.State); err == nil {
			out.State = raw
		}
	}
	return out, nil
}

// Tasks lists the tasks.
func (b *fleetBackend) Tasks(context.Context) ([]controlapi.Task, error) {
	ts := b.f.Tasks()
	out := make([]controlapi.Task, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskOf(t))
	}
	return out, nil
}

// Accept accepts; an escalated task is decided as a human's verdict, since
// the CLI is the human's path (seed §7).
func (b *fleetBackend) Accept(ctx context.Context, id string, d controlapi.Disposition) error {
	t, err := b.task(id)
	if err != nil {
		return err
	}
	disp := transport.Disposition(d)
	if t.Info().State == fleet.TaskEscalated {
		return apiError(t.Decide(context.WithoutCancel(ctx), fleet.Verdict{Accept: true, Disposition: disp}))
	}
	// With disposition stop, Accept waits for the worker to stop; a client
	// that goes away must not leave the verdict half carried out.
	return apiError(t.Accept(context.WithoutCancel(ctx), disp))
}

// Reject rejects; on an escalated task it is the human's verdict.
func (b *fleetBackend) Reject(ctx context.Context, id, feedback string) (controlapi.RejectResult, error) {
	t, err := b.task(id)
	if err != nil {
		return controlapi.RejectResult{}, err
	}
	if t.Info().State == fleet.TaskEscalated {
		return controlapi.RejectResult{}, apiError(t.Decide(ctx, fleet.Verdict{Feedback: feedback}))
	}
	escalated, err := t.Reject(ctx, feedback)
	return controlapi.RejectResult{Escalated: escalated}, apiError(err)
}

// TrustList lists the trust store.
func (b *fleetBackend) TrustList(context.Context) ([]controlapi.TrustDecision, error) {
	ds, err := b.f.Trust().List()
	if err != nil {
		return nil, apiError(err)
	}
	out := make([]controlapi.TrustDecision, 0, len(ds))
	for _, d := range ds {
		out = append(out, controlapi.TrustDecision{Machine: d.Machine, User: d.User, Key: d.Key, Policy: controlapi.Policy(d.Policy), DecidedAt: d.DecidedAt})
	}
	return out, nil
}

// TrustSet records a decision and has every refused agent dialled again
// (a refused agent's machine is not always known by name), so that a
// machine allowed after a refusal connects now; one still denied is
// refused again.
func (b *fleetBackend) TrustSet(ctx context.Context, machine string, p controlapi.Policy) (controlapi.TrustDecision, error) {
	pol, err := trust.ParsePolicy(string(p))
	if err != nil {
		return controlapi.TrustDecision{}, apiError(err)
	}
	d, err := b.f.SetTrust(machine, pol)
	if err != nil {
		return controlapi.TrustDecision{}, apiError(err)
	}
	for _, a := range b.f.Status(ctx).Agents {
		if a.State == transport.StateRejected {
			_ = b.f.Retry(a.Name)
		}
	}
	return controlapi.TrustDecision{Machine: d.Machine, User: d.User, Key: d.Key, Policy: controlapi.Policy(d.Policy), DecidedAt: d.DecidedAt}, nil
}

// Retry dials an agent now.
func (b *fleetBackend) Retry(_ context.Context, agent string) error {
	return apiError(b.f.Retry(agent))
}

// Watch subscribes to the fleet; the changes a slow reader lost are
// reported as one dropped change before the next one.
func (b *fleetBackend) Watch(ctx context.Context) (<-chan controlapi.Change, error) {
	sub := b.f.Subscribe(b.watchBuffer)
	out := make(chan controlapi.Change)
	go func() {
		defer close(out)
		defer sub.Close()
		var reported uint64
		send := func(c controlapi.Change) bool {
			select {
			case out <- c:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case c, ok := <-sub.C:
				if !ok {
					return
				}
				if lost := sub.Dropped(); lost > reported {
					if !send(controlapi.Change{Kind: controlapi.ChangeDropped, At: c.At, Count: lost - reported}) {
						return
					}
					reported = lost
				}
				if !send(changeOf(c)) {
					return
				}
			}
		}
	}()
	return out, nil
}

func changeOf(c fleet.Change) controlapi.Change {
	out := controlapi.Change{Kind: controlapi.ChangeKind(c.Kind), At: c.At, Agent: c.Agent, InstanceID: c.InstanceID,
		TaskID: c.TaskID, Event: c.Event, From: c.From, To: c.To, Message: c.Message}
	var data any
	switch {
	case c.WorkerEvent != nil:
		// Written out by the watch only for a reader that needs it whole.
		out.Worker = workerEvent{*c.WorkerEvent}
	case c.Report != nil:
		data = controlapi.TaskDone{Seq: c.Report.Seq, Status: c.Report.Status, Summary: c.Report.Summary, LastAssistantMessage: c.Report.LastAssistantMessage}
	case c.UI != nil:
		data = uiOf(*c.UI)
	}
	if data != nil {
		out.Data, _ = json.Marshal(data)
	}
	return out
}

// workerEvent is a fleet event as the control API's watch reads it.
type workerEvent struct{ fleet.Event }

func (e workerEvent) DeltaAfter(prev controlapi.WorkerEvent) (json.RawMessage, bool) {
	p, ok := prev.(workerEvent)
	if !ok {
		return nil, false
	}
	return e.Event.DeltaAfter(p.Event)
}

// Rebundle switches the bundle and reports what the instance runs now.
func (b *fleetBackend) Rebundle(ctx context.Context, id, name string) (controlapi.RebundleResult, error) {
	in, err := b.instance(id)
	if err != nil {
		return controlapi.RebundleResult{}, err
	}
	if err := in.Rebundle(context.WithoutCancel(ctx), name); err != nil { // bounded by the fleet's SpawnTimeout
		return controlapi.RebundleResult{}, apiError(err)
	}
	res := controlapi.RebundleResult{Bundle: name}
	for _, is := range b.f.Status(ctx).Instances {
		if is.InstanceID == id {
			res.Bundle, res.BundleHash = is.Bundle, is.BundleHash
		}
	}
	return res, nil
}

// SetTools sets the tools.
func (b *fleetBackend) SetTools(ctx context.Context, id string, tools []string) ([]string, error) {
	in, err := b.instance(id)
	if err != nil {
		return nil, err
	}
	active, err := in.SetTools(ctx, tools)
	return active, apiError(err)
}

// PinModel pins or unpins the model.
func (b *fleetBackend) PinModel(ctx context.Context, id string, pin bool) (controlapi.ModelPin, error) {
	in, err := b.instance(id)
	if err != nil {
		return controlapi.ModelPin{}, err
	}
	m, err := in.PinModel(ctx, pin)
	if err != nil {
		return controlapi.ModelPin{}, apiError(err)
	}
	res := controlapi.ModelPin{InstanceID: id, Pinned: pin}
	if m != nil {
		res.Model = &controlapi.ModelRef{Provider: m.Provider, ID: m.ID, Thinking: m.Thinking}
	}
	return res, nil
}

// SetModel switches the model.
func (b *fleetBackend) SetModel(ctx context.Context, id string, m controlapi.ModelRef) error {
	in, err := b.instance(id)
	if err != nil {
		return err
	}
	return apiError(in.SetModel(ctx, m.Provider, m.ID))
}

// UIAnswer finds the instance whose dialog it is and answers it.
func (b *fleetBackend) UIAnswer(ctx context.Context, requestID string, value json.RawMessage) error {
	var v any
	if err := json.Unmarshal(value, &v); err != nil {
		return &controlapi.Error{Code: controlapi.CodeBadRequest, Message: err.Error()}
	}
	err := b.f.AnswerUI(ctx, "", requestID, v)
	if errors.Is(err, fleet.ErrUnknownUIRequest) {
		return &controlapi.Error{Code: controlapi.CodeUnknownUIRequest, Message: fmt.Sprintf("no pending worker dialog %q", requestID)}
	}
	return apiError(err)
}

// Doctor runs the server's checks.
func (b *fleetBackend) Doctor(ctx context.Context) (controlapi.DoctorReport, error) {
	return controlapi.DoctorReport{Checks: b.doctor(ctx, b.f.Status(ctx))}, nil
}

// Sessions lists the registry's sessions; the baselines' HEADs are checked
// first, within ctx, so that their stale flags are current.
func (b *fleetBackend) Sessions(ctx context.Context, filter controlapi.SessionFilter) ([]controlapi.Session, error) {
	if filter.Machine != "" && !b.knownAgent(ctx, filter.Machine) {
		return nil, &controlapi.Error{Code: controlapi.CodeUnknownAgent, Message: fmt.Sprintf("no agent %q in the directory", filter.Machine)}
	}
	if filter.Kind == "" || filter.Kind == controlapi.KindBaseline {
		b.f.RefreshBaselines(ctx, filter.Machine)
	}
	views := b.f.ListSessions(fleet.SessionFilter{Machine: filter.Machine, Kind: session.Kind(filter.Kind)})
	out := make([]controlapi.Session, 0, len(views))
	for _, v := range views {
		out = append(out, sessionOf(v))
	}
	return out, nil
}

func (b *fleetBackend) knownAgent(ctx context.Context, name string) bool {
	for _, a := range b.f.Status(ctx).Agents {
		if a.Name == name {
			return true
		}
	}
	return false
}

// SearchSessions searches one agent, or every agent at once: the hits of
// those that answered, machine by machine, and why the others did not
// (not connected, refused, timed out).
func (b *fleetBackend) SearchSessions(ctx context.Context, q controlapi.SessionSearch) (controlapi.SearchResult, error) {
	if q.Machine != "" {
		hits, err := b.searchOne(ctx, q.Machine, q)
		if err != nil {
			return controlapi.SearchResult{}, err
		}
		return controlapi.SearchResult{Hits: hits}, nil
	}
	agents := b.f.Status(ctx).Agents // sorted by name
	type answer struct {
		hits []controlapi.SessionHit
		err  error
	}
	answers := make([]answer, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		if a.State != transport.StateEstablished {
			answers[i].err = &controlapi.Error{Code: controlapi.CodeNotConnected,
				Message: fmt.Sprintf("%s is %s", a.Name, a.State)}
			continue
		}
		wg.Go(func() {
			answers[i].hits, answers[i].err = b.searchOne(ctx, a.Name, q)
		})
	}
	wg.Wait()
	res := controlapi.SearchResult{Hits: []controlapi.SessionHit{}}
	for i, a := range answers {
		if a.err != nil {
			var e *controlapi.Error
			errors.As(a.err, &e)
			res.Failed = append(res.Failed, controlapi.SearchFailure{Machine: agents[i].Name, Error: e})
			continue
		}
		res.Hits = append(res.Hits, a.hits...)
	}
	return res, nil
}

// searchOne searches one agent's sessions, bounded by searchTimeout; the
// error is always a *controlapi.Error.
func (b *fleetBackend) searchOne(ctx context.Context, machine string, q controlapi.SessionSearch) ([]controlapi.SessionHit, error) {
	timeout := b.searchTimeout
	if timeout <= 0 {
		timeout = transport.DefaultRequestTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hits, err := b.f.SearchSessions(ctx, machine, q.Query, q.Cwd)
	if err != nil {
		return nil, apiError(fmt.Errorf("session search on %s: %w", machine, err))
	}
	out := make([]controlapi.SessionHit, 0, len(hits))
	for _, h := range hits {
		out = append(out, controlapi.SessionHit{Machine: machine, SessionID: h.SessionID, Path: h.Path, Snippet: h.Snippet})
	}
	return out, nil
}

// CreateBaseline primes a baseline. Like a spawn it runs to its end even
// when the client goes away (bounded by the settle and compact timeouts),
// so that no half-made baseline is left behind; stopping its worker ends
// it early.
func (b *fleetBackend) CreateBaseline(ctx context.Context, req controlapi.BaselineRequest) (controlapi.Baseline, error) {
	opts := fleet.BaselineOptions{Prompt: req.Prompt, Repo: req.Repo,
		SettleTimeout:  time.Duration(req.SettleTimeoutSeconds * float64(time.Second)),
		CompactTimeout: time.Duration(req.CompactTimeoutSeconds * float64(time.Second)),
		Spawn: fleet.SpawnOptions{Agent: req.Agent, Cwd: req.Cwd, Bundle: req.Bundle,
			Model: modelOf(req.Model), TraceID: req.TraceID}}
	bl, err := b.f.CreateBaseline(context.WithoutCancel(ctx), opts)
	if err != nil {
		return controlapi.Baseline{}, apiError(err)
	}
	return controlapi.Baseline{Machine: bl.Machine, Cwd: bl.Cwd, Name: bl.Name, Path: bl.Path, SessionID: bl.SessionID,
		GitHead: bl.GitHead, Bundle: bl.Bundle, BundleHash: bl.BundleHash, Compacted: bl.Compacted, Summary: bl.Summary}, nil
}
