package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/pirpc"
	"example.com/pifleet/transport/trust"
)

// instance is the fleet's view of one worker; guarded by the core's lock
// (coreState: written under Fleet.mu too).
type instance struct {
	f  *Fleet
	id string
	// spawnID is the spawn request's id: it names the instance until the
	// agent assigns id (Status, Fleet.Instance, Stop).
	spawnID string
	// spawnConn is the connection its spawn was sent on (its answer can
	// come on no other).
	spawnConn *transport.Conn
	// intent: the spawn's intent is stored and not dropped yet
	// (coreView.Intent); spawnErr is why the spawn failed, for Spawn.
	intent   bool
	spawnErr error
	agent    string
	rec      serverstore.Instance
	m        fsmkit.Machine[InstanceState, InstanceEvent]

	openTask   string
	maxRejects int
	autoAnswer []bundle.AutoAnswer
	// budget is what bounds each run of the worker: the spawn's, else
	// its bundle's (nil: unbounded).
	budget     *bundle.Budget
	onProgress func(SpawnProgress)

	run        *Run
	listeners  map[*Run]func(Event)
	tally      pirpc.Tally
	tail       []*streamdelta.Line
	tailNext   int
	snapshot   *pirpc.State
	snapshotAt time.Time
	activity   string
	cost       float64
	activityAt time.Time
	rpcWait    map[string]chan rpcResult
	ui         map[string]*UIRequest
	uiDeadline map[string]time.Time // pi's own timeouts, until their ui_request
	ended      chan struct{}
	// gone is why the worker ended by itself (workerGone), nil otherwise.
	gone *WorkerGoneError
	// aborts counts Abort calls: an abort's deadline applies to it alone.
	aborts uint64
	// runStarted: an agent_start was seen since the open task's prompt
	// (or feedback) was sent (coreView.RunStarted).
	runStarted bool
	// replayIncomplete: the last reconnect's events replay did not cover
	// every event since the open task's prompt (coreView.ReplayIncomplete).
	replayIncomplete bool
	// gen counts the instance's transitions and changes of its open task:
	// a plan that waited for a write outside f.mu goes on only if gen did
	// not move meanwhile (drive.go).
	gen uint64
	// written is the latest queued write of the instance's record: a call
	// that answers its caller waits for it (outside f.mu) first.
	written *serverstore.Pending
}

func newInstance(f *Fleet, id, agent string, rec serverstore.Instance, m fsmkit.Machine[InstanceState, InstanceEvent]) *instance {
	return &instance{
		f: f, id: id, agent: agent, rec: rec, m: m,
		maxRejects: DefaultMaxRejects,
		listeners:  map[*Run]func(Event){},
		rpcWait:    map[string]chan rpcResult{},
		ui:         map[string]*UIRequest{},
		uiDeadline: map[string]time.Time{},
		ended:      make(chan struct{}),
	}
}

func (inst *instance) appendTail(line *streamdelta.Line) {
	n := inst.f.cfg.TailBuffer
	if len(inst.tail) < n {
		inst.tail = append(inst.tail, line)
		return
	}
	inst.tail[inst.tailNext] = line
	inst.tailNext = (inst.tailNext + 1) % n
}

// tailCopy returns the tail, oldest first. Its lines are written out
// (rebuilt updates are written when first read) by Output, without f.mu.
func (inst *instance) tailCopy() []*streamdelta.Line {
	out := make([]*streamdelta.Line, 0, len(inst.tail))
	out = append(out, inst.tail[inst.tailNext:]...)
	return append(out, inst.tail[:inst.tailNext]...)
}

// endLocked: the instance reached a final state; everybody waiting on it
// is released.
func (inst *instance) endLocked() {
	select {
	case <-inst.ended:
	default:
		close(inst.ended)
	}
	err := inst.endErrLocked()
	inst.completeRunLocked("", err)()
	for id, w := range inst.rpcWait {
		w <- rpcResult{err: err}
		delete(inst.rpcWait, id)
	}
}

// endErrLocked is what a caller waiting on an ended instance gets: a
// *WorkerGoneError when the worker died, else ErrInstanceEnded.
func (inst *instance) endErrLocked() error {
	if inst.gone != nil {
		return inst.gone
	}
	return fmt.Errorf("%w: %s is %s", ErrInstanceEnded, inst.id, inst.m.State())
}

// completeRunLocked ends the prompt in flight and returns what releases
// its waiters; the caller runs it once the callbacks of the run's last
// events were run, so that a Prompt never returns before its OnEvent saw
// agent_settled.
func (inst *instance) completeRunLocked(text string, err error) func() {
	r := inst.run
	if r == nil {
		return func() {}
	}
	inst.run = nil
	delete(inst.listeners, r)
	r.text, r.err = text, err
	return func() { close(r.done) }
}

// Event is one line of a worker's stdout, as the agent forwarded it.
//
// A message_update may stand for several of the worker's: a pifleet agent
// joins the chunks of a text it gathers for one frame (at most 10 ms of
// them) into the last of them, whose delta is theirs joined (unless the
// fleet has Config.EveryUpdate). Its partial message is the worker's, so
// a consumer that appends every delta, or reads the partial message, has
// the whole text.
type Event struct {
	InstanceID string
	Agent      string
	// Type is the pi event type (message_update, tool_execution_start,
	// agent_settled, …).
	Type string
	At   time.Time
	line *streamdelta.Line // nil in the zero Event
}

// NewEvent returns the Event of line raw, for code that hands events to
// something that takes them (a test of an OnEvent callback, an adapter).
func NewEvent(instanceID, agent, typ string, raw json.RawMessage, at time.Time) Event {
	return Event{InstanceID: instanceID, Agent: agent, Type: typ, At: at, line: streamdelta.WholeLine(raw)}
}

// Raw returns the line, verbatim, as pi wrote it. The agent may stream a
// message_update as a change to the one before it: the fleet writes such
// a line out on the first call of Raw (any copy of the Event shares it),
// so that a consumer that needs only Type pays nothing for it. Once
// written it is kept; do not modify it.
func (e Event) Raw() json.RawMessage {
	if e.line == nil {
		return nil
	}
	return e.line.Bytes()
}

// DeltaAfter returns the event as a change to prev, the worker's event
// before it, when the agent streamed it as one (a message_update): a
// small JSON entry that rebuilds the event from prev's bytes (the entry
// format of event_delta frames, docs/protocol.md). ok is false for any
// other event, or another prev: the event is then to be relayed whole. A
// relay to readers of its own (the control API's watch) sends each update
// as O(chunk) bytes instead of the whole partial message.
func (e Event) DeltaAfter(prev Event) (entry json.RawMessage, ok bool) {
	return e.line.DeltaAfter(prev.line)
}

// SpawnProgress is one step of a spawn the agent reported.
type SpawnProgress struct {
	// SpawnID names the instance until it is spawned: Status lists it
	// under this id, and Fleet.Instance(SpawnID).Stop gives the spawn up.
	SpawnID string
	// Phase is accepted, provisioning, degraded or starting.
	Phase, Bundle, BundleHash, Message    string
	FilesTotal, FilesFetched, FilesReused int64
	BytesFetched, BytesReused             int64
}

// SpawnOptions say what to spawn where, and tune the spawn.
type SpawnOptions struct {
	// Agent is the name of the agent to run the worker on (as in the
	// directory of agents and Status).
	Agent string
	// Cwd is the worker's working directory on the agent's machine.
	Cwd string
	// Bundle is the name of the bundle in the registry the worker runs.
	Bundle string
	// PinnedHash is the only version (bundleHash) of the bundle the worker
	// may run: Spawn refuses at once when the registry serves another (a
	// *bundle.HashPinError), and the agent refuses any other it would
	// sync.
	PinnedHash string
	// Model overrides the bundle's model policy.
	Model *transport.ModelRef
	// FromSession starts the worker on a session of the registry: its
	// path, its session id or its name ("baseline:api"; the newest of that
	// name). The session's machine, cwd and bundle are used for an empty
	// machine, cwd or bundle name. A baseline whose repository's HEAD moved
	// is used, and flagged stale (Instance.Origin).
	FromSession string
	// SessionMode is clone (default: the worker clones the session at once
	// and works in the new file, named task:<taskId>:<slug>; the source's
	// bytes never change) or attach (it appends to the session itself;
	// refused for pinned sessions with ErrSessionPinned).
	SessionMode transport.SessionMode
	// Env is added to the worker's environment.
	Env map[string]string
	// Budget limits the worker's spend.
	Budget *transport.Budget
	// TraceID follows the spawn and every task of the instance across
	// server and agent logs; minted when empty.
	TraceID string
	// OnProgress, when set, receives the agent's spawn progress (files and
	// bytes fetched), in order, on the agent's frame goroutine: it must be
	// quick.
	OnProgress func(SpawnProgress)
	// Isolation runs the worker in a git worktree of its own (see
	// Isolation); nil shares Cwd with everyone else.
	Isolation *Isolation
}

// Instance is a handle on one worker instance.
type Instance struct {
	f  *Fleet
	id string
}

// ID returns the instance id the agent assigned.
func (i *Instance) ID() string { return i.id }

// ref is the id the instance goes by: its spawn id until it is spawned.
func (inst *instance) ref() string {
	if inst.id == "" {
		return inst.spawnID
	}
	return inst.id
}

// instanceLocked returns the instance id names: a spawned one, or one
// being spawned by its spawn id. f.mu or the core's lock must be held
// (it takes dirMu for the agents).
func (f *Fleet) instanceLocked(id string) *instance {
	if inst := f.core.instance(id); inst != nil {
		return inst
	}
	f.dirMu.Lock()
	defer f.dirMu.Unlock()
	for _, a := range f.agents {
		if inst := a.spawning[id]; inst != nil {
			return inst
		}
	}
	return nil
}

// Instance returns a handle on a tracked instance, or on one being
// spawned by its spawn id (SpawnProgress.SpawnID, Status).
func (f *Fleet) Instance(id string) (*Instance, error) {
	f.core.mu.RLock()
	defer f.core.mu.RUnlock()
	if f.instanceLocked(id) == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownInstance, id)
	}
	return &Instance{f: f, id: id}, nil
}

// State returns the instance's current state.
func (i *Instance) State() InstanceState {
	i.f.core.mu.RLock()
	defer i.f.core.mu.RUnlock()
	if inst := i.f.instanceLocked(i.id); inst != nil {
		return inst.m.State()
	}
	return ""
}

// Ended is closed when the instance reached stopped or failed.
func (i *Instance) Ended() <-chan struct{} {
	i.f.core.mu.RLock()
	defer i.f.core.mu.RUnlock()
	if inst := i.f.instanceLocked(i.id); inst != nil {
		return inst.ended
	}
	c := make(chan struct{})
	close(c)
	return c
}

// Spawn starts a worker of opts.Bundle on agent opts.Agent in opts.Cwd.
// An agent that is being dialled (right after Start, or on the dialer's
// retry) is waited for within ctx and Config.SpawnTimeout; one that is
// lost between retries fails at once with ErrNotConnected (WaitAgent waits
// through those). The bundle's manifest is read from the registry root and
// checked against the agent's platform (a *bundle.PlatformError) and
// SpawnOptions.PinnedHash (a *bundle.HashPinError) before any frame is
// sent. A refusal of the agent is a *SpawnError with its spawn_error code.
// Spawn returns once the instance is idle (spawned), or failed.
func (f *Fleet) Spawn(ctx context.Context, opts SpawnOptions) (*Instance, error) {
	if f.cfg.RegistryRoot == "" {
		return nil, &ConfigError{Field: "RegistryRoot", Reason: "Spawn needs a registry"}
	}
	ctx, cancelAll := context.WithTimeout(ctx, f.cfg.SpawnTimeout)
	defer cancelAll()
	machine, cwd, bundleName := opts.Agent, opts.Cwd, opts.Bundle
	if machine != "" {
		if err := f.waitAgent(ctx, machine, false); err != nil {
			return nil, fmt.Errorf("fleet: spawn: %w", err)
		}
	}
	var origin *serverstore.Instance
	if opts.FromSession != "" {
		o, err := f.resolveOrigin(ctx, &machine, &cwd, &bundleName, &opts)
		if err != nil {
			return nil, err
		}
		origin = o
		if err := f.waitAgent(ctx, machine, false); err != nil {
			return nil, fmt.Errorf("fleet: spawn: %w", err)
		}
	}
	switch {
	case machine == "":
		return nil, &ConfigError{Field: "Agent", Reason: "Spawn needs an agent name"}
	case bundleName == "":
		return nil, &ConfigError{Field: "Bundle", Reason: "Spawn needs a bundle name"}
	}
	man, err := registry.Show(f.cfg.RegistryRoot, bundleName)
	if err != nil {
		return nil, fmt.Errorf("fleet: spawn: %w", err)
	}
	var mrPtr *float64
	if man.Review != nil {
		mrPtr = man.Review.MaxRejects
	}
	maxRejects, err := ResolveMaxRejects(mrPtr)
	if err != nil {
		return nil, err
	}
	traceID := opts.TraceID
	if traceID == "" {
		traceID = f.newTraceID()
	}
	env := map[string]string{}
	for k, v := range opts.Env {
		env[k] = v
	}
	rec := serverstore.Instance{Machine: machine, Cwd: cwd, Bundle: bundleName, BundleHash: man.BundleHash,
		TraceID: traceID, State: string(StateRequested)}
	if opts.PinnedHash != "" {
		rec.BundleHash = opts.PinnedHash
	}
	if opts.Model != nil {
		rec.Model = &serverstore.ModelRef{Provider: opts.Model.Provider, ID: opts.Model.ID, Thinking: opts.Model.Thinking}
	}
	fromSession, sessionMode := "", transport.SessionMode("")
	if origin != nil {
		rec.FromSession, rec.SessionMode, rec.StaleBaseline = origin.FromSession, origin.SessionMode, origin.StaleBaseline
		fromSession = origin.FromSession
		if origin.SessionMode == string(transport.SessionAttach) {
			sessionMode = transport.SessionAttach // absent means clone, for TypeScript agents too
		}
	}
	spawnID := f.newSpawnID()
	rec.SpawnID = spawnID

	f.mu.Lock()
	a, c, err := f.connForLocked(machine, trust.OpSpawn)
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	if err := man.CheckPlatform(a.platform()); err != nil {
		f.mu.Unlock()
		return nil, err // before any frame
	}
	if err := man.CheckPinnedHash(opts.PinnedHash); err != nil {
		f.mu.Unlock()
		return nil, err // before any frame: a TypeScript agent would not check
	}
	if err := checkIsolation(a, opts.Isolation); err != nil {
		f.mu.Unlock()
		return nil, err // an agent that ignored it would run the worker in the user's tree
	}
	if url := f.ends.registryURL(); url != "" {
		if _, set := env["PI_FLEET_SERVER"]; !set {
			env["PI_FLEET_SERVER"] = url
		}
	}
	inst := newInstance(f, "", machine, rec, InstanceTable.Start())
	inst.spawnID = spawnID
	inst.maxRejects = maxRejects
	inst.budget = man.Budget
	if b := opts.Budget; b != nil {
		inst.budget = &bundle.Budget{MaxCost: b.MaxCost, MaxTurns: b.MaxTurns, MaxMinutes: b.MaxMinutes}
	}
	inst.onProgress = opts.OnProgress
	if man.UI != nil {
		inst.autoAnswer = man.UI.AutoAnswer
	}
	fr := &transport.SpawnFrame{Header: transport.Header{ID: spawnID, TraceID: traceID},
		Cwd: cwd, Bundle: bundleName, BundleHash: opts.PinnedHash, FromSession: fromSession, SessionMode: sessionMode,
		Model: opts.Model, Budget: opts.Budget, Isolation: opts.Isolation.frame()}
	if len(env) > 0 {
		fr.Env = env
	}
	// The core stores the spawn's intent, then sends its frame once the
	// intent is durable, outside the fleet's lock; a caller that gave up
	// meanwhile sends nothing.
	d := &drive{inst: inst, a: a, c: c, spawnFrame: fr, resumable: true}
	w, _, _, err := f.stepLocked(d, coreInput{Kind: inSpawn})
	f.mu.Unlock()
	if err == nil {
		err = f.waitWrites(d)
	}
	if err == nil && ctx.Err() != nil {
		f.mu.Lock()
		err = f.spawnGivenUpLocked(ctx, inst, nil, ctx.Err())
		f.mu.Unlock()
		return nil, fmt.Errorf("fleet: spawn on %s: %w", machine, err)
	}
	if err == nil {
		var w2 *waiter
		w2, _, err = f.finishStep(ctx, d)
		if w2 != nil {
			w = w2
		}
	}
	if err != nil {
		f.mu.Lock()
		f.spawnGivenUpLocked(ctx, inst, nil, err)
		f.mu.Unlock()
		return nil, err
	}

	_, err = await(ctx, w)
	f.mu.Lock()
	if err != nil {
		err = f.spawnGivenUpLocked(ctx, inst, w, err)
		f.mu.Unlock()
		return nil, fmt.Errorf("fleet: spawn on %s: %w", machine, err)
	}
	written, spawnErr := inst.written, inst.spawnErr
	f.mu.Unlock()
	if spawnErr != nil {
		return nil, spawnErr
	}
	h := &Instance{f: f, id: inst.id}
	// The new instance's record is durable before Spawn answers (it was
	// queued under the lock, and committed outside it).
	if err := f.waitWritten(written); err != nil {
		_ = h.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("fleet: spawn on %s: %w", machine, err)
	}
	if err := f.nameClone(ctx, h); err != nil {
		// An unnamed clone carries its baseline's name: it must not live.
		_ = h.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return h, nil
}

// isSpawnState reports the states before the worker is up.
func isSpawnState(s InstanceState) bool {
	return s == StateRequested || s == StateSpawning || s == StateProvisioning || s == StateDegradedCache
}

// lookupLocked returns the instance and its agent's connection, checked
// against the agent's trust policy for op. An instance that has ended is
// refused with an *InstanceEndedError for anything but viewing (its
// agent still serves the files of its working tree): its worker takes
// no more requests.
func (f *Fleet) lookupLocked(id string, op trust.Operation) (*instance, *agentState, *transport.Conn, error) {
	inst := f.instanceLocked(id)
	if inst == nil {
		return nil, nil, nil, fmt.Errorf("%w: %q", ErrUnknownInstance, id)
	}
	if err := inst.refuseEndedLocked(); err != nil && op.Kind != trust.Viewing {
		return inst, nil, nil, err
	}
	a, c, err := f.connForLocked(inst.agent, op)
	return inst, a, c, err
}

// refuseEndedLocked is the *InstanceEndedError of an instance that has
// ended, else nil.
func (inst *instance) refuseEndedLocked() error {
	if state := inst.m.State(); InstanceTable.IsFinal(state) {
		return &InstanceEndedError{InstanceID: inst.id, State: state, Gone: inst.gone}
	}
	return nil
}

// ---- prompts ----

// Run is a prompt in flight (Instance.PromptAsync).
type Run struct {
	done chan struct{}
	text string
	err  error
}

// Done is closed when the run settled (or the instance ended).
func (r *Run) Done() <-chan struct{} { return r.done }

// Result returns the final assistant message once Done is closed.
func (r *Run) Result() (string, error) {
	select {
	case <-r.done:
		return r.text, r.err
	default:
		return "", errors.New("fleet: run not settled yet")
	}
}

// Wait waits for the run to settle and returns the final assistant
// message.
func (r *Run) Wait(ctx context.Context) (string, error) {
	if err := waitOrCtx(ctx, r.done); err != nil {
		return "", err
	}
	return r.text, r.err
}

// PromptOptions tune a prompt.
type PromptOptions struct {
	// OnEvent receives every event of the worker while the prompt runs,
	// in order, on the agent's frame goroutine: it must be quick.
	OnEvent func(Event)
}

// Prompt sends text to an idle worker and waits until it settled,
// returning the final assistant message. Progress streams to
// opts.OnEvent. While the instance is in a review state the prompt asks
// for evidence and moves nothing.
func (i *Instance) Prompt(ctx context.Context, text string, opts PromptOptions) (string, error) {
	r, err := i.PromptAsync(ctx, text, opts)
	if err != nil {
		return "", err
	}
	return r.Wait(ctx)
}

// PromptAsync sends text and returns at once; the Run settles later.
// While the agent's send queue is full it waits for room as long as ctx
// allows.
func (i *Instance) PromptAsync(ctx context.Context, text string, opts PromptOptions) (*Run, error) {
	return i.f.prompt(ctx, i.id, text, opts)
}

// prompt sends an untracked prompt (Submit sends the tracked ones).
func (f *Fleet) prompt(ctx context.Context, id, text string, opts PromptOptions) (*Run, error) {
	var r *Run
	err := f.whileQueueFull(ctx, "prompt "+id, func() (err error) {
		r, err = f.promptLocked(id, text, opts)
		return err
	})
	return r, err
}

func (f *Fleet) promptLocked(id, text string, opts PromptOptions) (*Run, error) {
	inst, a, c, err := f.lookupLocked(id, trust.OpSteer)
	if err != nil {
		return nil, err
	}
	d := &drive{inst: inst, a: a, c: c, prompt: text, opts: opts}
	_, _, ok, err := f.stepLocked(d, coreInput{Kind: inPrompt})
	if !ok {
		st := string(inst.m.State())
		if inst.run != nil {
			st += " (a prompt is in flight)"
		}
		return nil, &StateError{Kind: "instance", ID: id, State: st, Op: "prompt"}
	}
	if err != nil {
		return nil, err
	}
	return d.run, nil
}

// startRunLocked sends a prompt (tracked with taskID, or not) and starts
// the Run that settles with it.
func (f *Fleet) startRunLocked(inst *instance, c *transport.Conn, text, taskID string, opts PromptOptions) (*Run, error) {
	cmd, _ := pirpc.EncodeCommand("", pirpc.Prompt{Message: text})
	fr := &transport.RPCFrame{Header: transport.Header{TraceID: inst.rec.TraceID}, InstanceID: inst.id, Command: cmd, TaskID: taskID}
	if err := trySend(c, fr); err != nil {
		return nil, err
	}
	r := &Run{done: make(chan struct{})}
	inst.run = r
	inst.tally = pirpc.Tally{}
	if opts.OnEvent != nil {
		inst.listeners[r] = opts.OnEvent
	}
	return r, nil
}

// Steer queues a message delivered after the worker's current turn. It
// fires nothing. While the agent's send queue is full it waits for room
// as long as ctx allows.
func (i *Instance) Steer(ctx context.Context, text string) error {
	return i.f.sendCommand(ctx, i.id, "steer", pirpc.Steer{Message: text})
}

// FollowUp queues a message delivered when the worker would stop. While
// the agent's send queue is full it waits for room as long as ctx allows.
func (i *Instance) FollowUp(ctx context.Context, text string) error {
	return i.f.sendCommand(ctx, i.id, "follow_up", pirpc.FollowUp{Message: text})
}

func (f *Fleet) sendCommand(ctx context.Context, id, what string, cmd pirpc.Command) error {
	raw, err := pirpc.EncodeCommand("", cmd)
	if err != nil {
		return err
	}
	return f.whileQueueFull(ctx, what+" "+id, func() error {
		inst, _, c, err := f.lookupLocked(id, trust.OpSteer)
		if err != nil {
			return err
		}
		return trySend(c, &transport.RPCFrame{Header: transport.Header{TraceID: inst.rec.TraceID}, InstanceID: id, Command: raw})
	})
}

// Abort stops the worker's current run (running → aborting → idle once it
// settled). A tracked task in flight is marked aborted first, so its
// task_done starts no review. While the agent's send queue is full it
// waits for room as long as ctx allows.
func (i *Instance) Abort(ctx context.Context) error {
	f := i.f
	var d *drive
	err := f.whileQueueFull(ctx, "abort "+i.id, func() error {
		inst, a, c, err := f.lookupLocked(i.id, trust.OpSteer)
		if err != nil {
			return err
		}
		d = &drive{inst: inst, a: a, c: c}
		_, _, ok, err := f.stepLocked(d, coreInput{Kind: inAbort})
		if !ok {
			return &StateError{Kind: "instance", ID: i.id, State: string(inst.m.State()), Op: "abort"}
		}
		return err
	})
	if err != nil {
		return err
	}
	_, _, err = f.finishStep(ctx, d) // the aborted task and the instance's state are durable
	return err
}

// armAbortDeadlineLocked gives this abort Config.AbortTimeout to settle:
// a run still going then was not aborted (an extension command waiting
// on a dialog, a worker that ignores abort), and the instance is running
// again, where Stop ends it.
func (f *Fleet) armAbortDeadlineLocked(inst *instance) {
	inst.aborts++
	n := inst.aborts
	time.AfterFunc(f.cfg.AbortTimeout, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.state != lifeStarted || inst.aborts != n || inst.m.State() != StateAborting {
			return
		}
		f.log.Warn().Str("instance", inst.id).Dur("after", f.cfg.AbortTimeout).Msg("abort not confirmed in time; the run goes on")
		a := f.agents[inst.agent]
		d := &drive{inst: inst, a: a}
		if a != nil {
			d.c = a.conn
		}
		if _, _, _, err := f.stepLocked(d, coreInput{Kind: inAbortTimeout}); err != nil {
			f.log.Error().Err(err).Str("instance", inst.id).Msg("abort deadline")
		}
	})
}

func (f *Fleet) sendAbortLocked(inst *instance, c *transport.Conn) error {
	raw, _ := pirpc.EncodeCommand("", pirpc.Abort{})
	return trySend(c, &transport.RPCFrame{Header: transport.Header{TraceID: inst.rec.TraceID}, InstanceID: inst.id, Command: raw})
}

// Stop stops the worker (graceful: abort, close stdin; forced after the
// agent's grace period) and waits for the agent's stopped answer.
func (i *Instance) Stop(ctx context.Context) error {
	f := i.f
	var (
		inst  *instance
		w     *waiter
		ended <-chan struct{}
	)
	err := f.whileQueueFull(ctx, "stop "+i.id, func() error {
		var (
			a   *agentState
			c   *transport.Conn
			err error
		)
		inst, a, c, err = f.lookupLocked(i.id, trust.OpSpawn)
		if err != nil {
			return err
		}
		spawning := isSpawnState(inst.m.State()) // the spawn is given up; its answer ends it
		var ok bool
		w, _, ok, err = f.stepLocked(&drive{inst: inst, a: a, c: c}, coreInput{Kind: inStop})
		if !ok {
			return &StateError{Kind: "instance", ID: i.id, State: string(inst.m.State()), Op: "stop"}
		}
		if err == nil && spawning {
			ended = inst.ended
		}
		return err
	})
	if err != nil {
		return err
	}
	if ended != nil { // stopped during its spawn: the spawn's answer ends it
		select {
		case <-ended:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.awaitEnd(ctx, inst, w)
}

// sendStopLocked queues a stop whose answer fires stoppedGracefully,
// stoppedForced or (unknown_instance) workerGone.
func (f *Fleet) sendStopLocked(inst *instance, a *agentState, c *transport.Conn) (*waiter, error) {
	return f.requestLocked(a, c, &transport.StopFrame{Header: transport.Header{TraceID: inst.rec.TraceID}, InstanceID: inst.id},
		f.stopAnswer(inst))
}

// stopAnswer handles the answer to a stop (or to a task_accept with
// disposition stop): the core decides what it does to the instance.
func (f *Fleet) stopAnswer(inst *instance) func(transport.Frame) {
	return func(ans transport.Frame) {
		var in coreInput
		switch ans := ans.(type) {
		case *transport.StoppedFrame:
			in = coreInput{Kind: inStopped, Forced: ans.Forced, SessionPath: ans.SessionPath}
		case *transport.ErrorFrame:
			in = coreInput{Kind: inStopRefused, Code: ans.Code}
		default:
			return
		}
		if _, _, _, err := f.stepLocked(f.driveLocked(inst), in); err != nil {
			f.log.Error().Err(err).Str("instance", inst.id).Msg("stop answer")
		}
	}
}

func (f *Fleet) awaitEnd(ctx context.Context, inst *instance, w *waiter) error {
	ans, err := await(ctx, w)
	if err != nil {
		return err
	}
	if e, ok := ans.(*transport.ErrorFrame); ok && e.Code != codeUnknownInstance {
		return fmt.Errorf("fleet: stop %s: agent answered %s: %s", inst.id, e.Code, e.Message)
	}
	return f.durable(inst)
}

// durable waits until the latest queued write of inst's record is
// committed, and returns its error. f.mu must not be held.
func (f *Fleet) durable(inst *instance) error {
	f.mu.Lock()
	p := inst.written
	f.mu.Unlock()
	return f.waitWritten(p)
}

// ---- raw rpc, state, model ----

// RPC sends one pi RPC command (a JSON object) to the worker and returns
// pi's response. An id is added to the command (the agent forwards the
// response as an event carrying it).
func (i *Instance) RPC(ctx context.Context, command json.RawMessage) (*pirpc.Response, error) {
	var fields map[string]any
	if err := json.Unmarshal(command, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("fleet: rpc command must be a JSON object: %w", err)
	}
	return i.f.rpc(ctx, i.id, fields, trust.OpSteer)
}

// rpcResult is pi's response to an rpc, or the agent's error frame.
type rpcResult struct {
	resp *pirpc.Response
	err  error
}

func (f *Fleet) rpc(ctx context.Context, id string, fields map[string]any, op trust.Operation) (*pirpc.Response, error) {
	return f.rpcWithin(ctx, id, fields, op, f.requestTimeout())
}

// rpcWithin is rpc with its own deadline, for commands that take long
// (compact asks the model for a summary).
func (f *Fleet) rpcWithin(ctx context.Context, id string, fields map[string]any, op trust.Operation, timeout time.Duration) (*pirpc.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		inst *instance
		a    *agentState
	)
	rid := "rpc-" + f.hex(10)
	ch := make(chan rpcResult, 1)
	err := f.whileQueueFull(ctx, "rpc to "+id, func() error {
		var (
			c   *transport.Conn
			err error
		)
		inst, a, c, err = f.lookupLocked(id, op)
		if err != nil {
			return err
		}
		// The frame carries the same id as the command: pi's response comes
		// back as an event with it, and an agent that refuses the frame
		// (model_pinned, unknown_instance, …) echoes it on its error.
		fr := &transport.RPCFrame{Header: transport.Header{ID: rid, TraceID: inst.rec.TraceID}, InstanceID: id, Command: rawCommand(rid, fields)}
		if err := trySend(c, fr); err != nil {
			return err
		}
		inst.rpcWait[rid] = ch
		a.waiters[rid] = &waiter{ch: make(chan transport.Frame, 1), onAnswer: func(ans transport.Frame) {
			if e, ok := ans.(*transport.ErrorFrame); ok {
				if w, ok := inst.rpcWait[rid]; ok {
					delete(inst.rpcWait, rid)
					w <- rpcResult{err: agentRefusal(e)}
				}
			}
		}}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		f.mu.Lock()
		delete(inst.rpcWait, rid)
		delete(a.waiters, rid)
		f.mu.Unlock()
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return r.resp, r.resp.Err()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// agentRefusal is the error of an error frame answering an rpc.
func agentRefusal(e *transport.ErrorFrame) error {
	err := &transport.RemoteError{Code: e.Code, Message: e.Message}
	if e.Code == codeModelPinned {
		return fmt.Errorf("%w: %w", ErrModelPinned, err)
	}
	return err
}

// codeModelPinned is the agent's refusal of set_model and cycle_model on a
// pinned model (docs/protocol.md).
const codeModelPinned = "model_pinned"

func (f *Fleet) requestTimeout() time.Duration {
	if f.cfg.Conn.RequestTimeout > 0 {
		return f.cfg.Conn.RequestTimeout
	}
	return transport.DefaultRequestTimeout
}

// GetState asks the worker for its state (get_state) and keeps it as the
// instance's snapshot.
func (i *Instance) GetState(ctx context.Context) (*pirpc.State, error) {
	r, err := i.f.rpc(ctx, i.id, map[string]any{"type": "get_state"}, trust.OpView)
	if err != nil {
		return nil, err
	}
	var st pirpc.State
	if err := r.Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// SetModel switches the worker's model (pi's set_model); a worker whose
// model is pinned refuses.
func (i *Instance) SetModel(ctx context.Context, provider, modelID string) error {
	_, err := i.f.rpc(ctx, i.id, map[string]any{"type": "set_model", "provider": provider, "modelId": modelID}, trust.OpSteer)
	if err != nil {
		return err
	}
	i.f.mu.Lock()
	inst := i.f.core.instance(i.id)
	if inst != nil {
		inst.rec.Model = &serverstore.ModelRef{Provider: provider, ID: modelID}
		i.f.persistInstanceLocked(inst)
	}
	i.f.mu.Unlock()
	if inst == nil {
		return nil
	}
	return i.f.durable(inst)
}

// PinModel pins (or unpins) the worker's model: while pinned the agent
// refuses set_model and cycle_model (an error with code model_pinned),
// sets a changed model back and reports it (ChangeModelDrift). A bundle
// whose manifest says model.pin is pinned from its spawn on. It returns
// the model concerned (nil when the agent does not know it yet); pifleet
// agents only (ErrNotSupported).
func (i *Instance) PinModel(ctx context.Context, pin bool) (*transport.ModelRef, error) {
	ans, err := i.f.request(ctx, i.id, trust.OpSteer, true, func(inst *instance) transport.Frame {
		return &transport.ModelPinFrame{InstanceID: inst.id, Pin: pin}
	})
	if err != nil {
		return nil, err
	}
	mp, ok := ans.(*transport.ModelPinnedFrame)
	if !ok {
		return nil, wrongAnswer("model_pin", (*transport.ModelPinnedFrame)(nil), ans)
	}
	i.f.mu.Lock()
	inst := i.f.core.instance(i.id)
	if inst != nil {
		inst.rec.ModelPinned = mp.Pin
		if mp.Model != nil {
			inst.rec.Model = &serverstore.ModelRef{Provider: mp.Model.Provider, ID: mp.Model.ID, Thinking: mp.Model.Thinking}
		}
		i.f.persistInstanceLocked(inst)
	}
	i.f.mu.Unlock()
	if inst != nil {
		if err := i.f.durable(inst); err != nil {
			return mp.Model, err
		}
	}
	return mp.Model, nil
}

// Output is what the fleet holds of a worker's output.
type Output struct {
	// Tail is the latest events, oldest first (Config.TailBuffer).
	Tail []json.RawMessage
	// State is a get_state snapshot: fresh when the agent is reachable,
	// else the last one taken (SnapshotAt says when).
	State      *pirpc.State
	SnapshotAt time.Time
	// LastAssistant is the latest assistant text seen.
	LastAssistant string
}

// Output returns the buffered tail and a state snapshot.
func (i *Instance) Output(ctx context.Context) (Output, error) {
	f := i.f
	f.core.mu.RLock()
	inst := f.core.instance(i.id)
	if inst == nil {
		f.core.mu.RUnlock()
		return Output{}, fmt.Errorf("%w: %q", ErrUnknownInstance, i.id)
	}
	reachable := !InstanceTable.IsFinal(inst.m.State()) && inst.m.State() != StateUnreachable
	f.core.mu.RUnlock()
	if reachable {
		if _, err := i.GetState(ctx); err != nil {
			f.log.Debug().Err(err).Str("instance", i.id).Msg("output: snapshot not refreshed")
		}
	}
	f.core.mu.RLock()
	tail := inst.tailCopy()
	out := Output{State: inst.snapshot, SnapshotAt: inst.snapshotAt, LastAssistant: inst.tally.LastAssistantText}
	f.core.mu.RUnlock()
	out.Tail = make([]json.RawMessage, len(tail))
	for i, l := range tail {
		out.Tail[i] = l.Bytes()
	}
	return out, nil
}

// request sends a request frame built by mk (called with f.mu held: it
// must not call back into the fleet) and waits for its answer (a
// transport-level request: the answer is not handled in order with
// events).
func (f *Fleet) request(ctx context.Context, id string, op trust.Operation, needPifleet bool,
	mk func(*instance) transport.Frame) (transport.Frame, error) {
	f.mu.Lock()
	inst, a, c, err := f.lookupLocked(id, op)
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	if needPifleet && !a.pifleet {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrNotSupported, a.name)
	}
	fr := mk(inst)
	fr.Envelope().TraceID = inst.rec.TraceID
	f.mu.Unlock()
	return c.Request(ctx, fr)
}

// AnswerUI answers a worker dialog that policy did not answer. value is
// a string, a bool, or nil (cancel). An empty instanceID finds the dialog
// by its request id among all instances. A dialog pi already answered
// itself (its own timeout passed), or that its agent reported ended
// without an answer, is refused with ErrUIRequestExpired.
func (f *Fleet) AnswerUI(ctx context.Context, instanceID, requestID string, value any) error {
	return f.whileQueueFull(ctx, "answer dialog "+requestID, func() error {
		if instanceID == "" {
			for id, inst := range f.core.allInstances() {
				if inst.ui[requestID] != nil {
					instanceID = id
					break
				}
			}
			if instanceID == "" {
				return fmt.Errorf("%w: %s", ErrUnknownUIRequest, requestID)
			}
		}
		inst, _, c, err := f.lookupLocked(instanceID, trust.OpSteer)
		if err != nil {
			return err
		}
		u := inst.ui[requestID]
		if u == nil {
			return fmt.Errorf("%w: %s of %s", ErrUnknownUIRequest, requestID, instanceID)
		}
		if u.expired(f.cfg.Now()) {
			delete(inst.ui, requestID)
			if u.ended != "" {
				return fmt.Errorf("%w: %s of %s: %s", ErrUIRequestExpired, requestID, instanceID, u.endText())
			}
			return fmt.Errorf("%w: %s of %s: pi answered it itself when its timeout passed at %s", ErrUIRequestExpired,
				requestID, instanceID, u.Deadline.Format(time.TimeOnly))
		}
		raw, err := json.Marshal(value)
		if err != nil {
			return err
		}
		if err := trySend(c, &transport.UIResponseFrame{Header: transport.Header{TraceID: inst.rec.TraceID},
			InstanceID: instanceID, RequestID: requestID, Value: raw}); err != nil {
			return err
		}
		delete(inst.ui, requestID)
		return nil
	})
}
