package fleet

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/dialer"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/trust"
)

// Fleet is the orchestrator: it keeps the agents of its directory
// connected, tracks every worker instance through InstanceTable, and keeps
// its durable state (tasks, reviews, task_done dedupe keys, instances,
// trust decisions, session projections) in one bbolt file under
// Config.StateDir.
//
// # Concurrency
//
// Every method is safe for concurrent use. Changes to instances, tasks
// and connections are made under one fleet-wide lock: an event is fired
// while it is held, and the side effect that follows (queueing a frame,
// persisting, notifying) happens after Fire succeeded. A frame is queued
// on its connection before the event that says it was written is fired,
// under the same lock, so the agent's answer to it can never be handled
// first. Frames of one agent are handled in arrival order on that
// connection's handler goroutine.
//
// Reads that need no connection (Status, Tasks, Task and Instance
// lookups and their getters, ListSessions) do not take that lock: they
// wait only for a change of the instances and tasks in progress, never
// for a connection being set up or lost, nor for each other.
//
// Nothing durable is written while a lock is held that other calls wait
// for: a change of a record is queued under the fleet lock, in the order
// of the decisions, and committed outside it, several in one fsync. What
// a change licenses waits for it to be on disk (a task's prompt waits for
// the task's record; a method returns once its changes are durable, with
// their error).
type Fleet struct {
	// The fleet's state is kept in parts, each with its own lock and
	// file, taken in this order (a lock may be taken while holding the
	// ones above it, never the other way round):
	//
	//  1. agentState.catchUp: one agent's session catch-ups, one at a
	//     time (held across the agent's requests).
	//  2. core.mu (corestate.go): the instances and tasks, the catch-ups
	//     running and the spawns a previous life left. Written under
	//     core.mu and mu; read under either: the SDK's and the control
	//     API's reads take core.mu alone, for reading.
	//  3. mu (lockcheck.go): the fleet lock. It guards the lifecycle and
	//     the agents' connections (agents, agent.go) and is held by every
	//     change. mu.Lock takes core.mu before it, so that any section
	//     under it may change the instances and tasks (and the fleet lock
	//     is not held while the core's readers finish); mu.lockAgents
	//     takes mu alone, for a section that changes only a connection.
	//  4. dirMu: what the dialer, WaitAgent and Status read of the agents
	//     (see dirMu); sessions (sessionset.go): the session projections
	//     and the repositories' HEADs; mirrors (mirrors.go): the open
	//     session mirrors; ends (endpoints.go): the listeners and the
	//     addresses they are reached at.
	//  5. subs (subscribe.go): the subscriptions. Changes are published
	//     with mu held, so that they are seen in the order they happened.
	//
	// dirMu, sessions, mirrors, ends and subs take no other lock (but
	// sessions queues writes on the state store: see sessionSet). No
	// lock of 1–3 is held while waiting for the disk (in the package's
	// tests such a wait panics: lockcheck.go).
	//
	// notify (notify.go), the task_done reports waiting for the
	// application, keysMu and randMu guard what they are named after and
	// are taken with no other lock held.
	cfg   Config
	log   zerolog.Logger
	store *serverstore.Store
	trust *trust.Store
	dial  *dialer.Dialer
	// keys is the server's key ring as last read from Config.KeyFile.
	keysMu sync.Mutex
	keys   *auth.KeyRing
	reg    *registry.Server
	subs   *subscribers
	ends   endpoints

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	randMu sync.Mutex
	rand   *rand.Rand

	mu    fleetMutex
	state lifecycle

	// Agent connections (agent.go, and dial.go, inbound.go and
	// tailnet.go for the ways an agent connects), guarded by mu.
	agents map[string]*agentState
	// agentsChanged is closed (and replaced) whenever an agent is added
	// or its connection changes state: WaitAgent waits on it.
	agentsChanged chan struct{}
	// dirMu guards, together with mu, what the dialer, WaitAgent and
	// Status read of the agents: the map agents, each agent's addresses
	// (addrs, source), connection machine (m), connection (conn), last
	// error, hello, identity, policy, address and times of connection
	// and loss, the lifecycle (state) and agentsChanged. They are written
	// holding mu and then dirMu (setDirLocked, fireConnLocked,
	// agentsChangedLocked), and read holding either: the dialer's
	// directory, WaitAgent and Status take dirMu alone, so they never
	// wait for the fleet lock.
	dirMu sync.Mutex

	// core is the instances and tasks (corestate.go): what the
	// decision core (core.go) decides on and its driver (drive.go)
	// changes. Its lock is core.mu (above).
	core coreState

	// Sessions (sessions.go, baseline.go). The projections and HEADs
	// and the mirrors have their own locks.
	sessions *sessionSet
	mirrors  *mirrorSet

	notify *notifyQueue

	// serverID names this server in its spawn ids (spawnintent.go).
	serverID string
	// hooks are points a test can hold the fleet at.
	hooks fleetHooks

	closeOnce sync.Once
	closeErr  error
}

type lifecycle int

const (
	lifeNew lifecycle = iota
	lifeStarted
	lifeClosed
)

// New opens the fleet's state (Config.StateDir) and restores it: tasks,
// instances (those that were reachable come back as unreachable until
// their agent reconnects), trust decisions, session projections. Nothing
// runs until Start.
func New(opts ...Option) (*Fleet, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Rand == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:])
		cfg.Rand = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	if cfg.Conn.Heartbeats == nil {
		cfg.Conn.Heartbeats = transport.NewHeartbeats() // one goroutine beats every agent
	}
	var mu *fleetMutex // the new fleet's, once it exists
	stopts := []serverstore.Option{serverstore.WithClock(cfg.Now), serverstore.WithLogger(cfg.Logger),
		serverstore.WithWaitCheck(func() {
			if mu != nil {
				mu.mustNotHold()
			}
		})}
	if cfg.ResetCorruptState {
		stopts = append(stopts, serverstore.WithResetCorrupt(func(movedTo string, cause error) {
			cfg.Logger.Warn().Str("movedTo", movedTo).AnErr("cause", cause).Msg("corrupt state file moved aside; starting with an empty state")
		}))
	}
	st, err := serverstore.Open(cfg.StateDir, stopts...)
	if err != nil {
		return nil, err
	}
	if cfg.KeyFile == "" {
		cfg.KeyFile = filepath.Join(cfg.StateDir, KeyFile)
	}
	ring, err := auth.LoadOrCreate(cfg.KeyFile)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	// The trust store's writes join the state file's write queue: agents
	// met for the first time at once share its fsyncs.
	topts := []trust.Option{trust.WithClock(cfg.Now), trust.WithLogger(cfg.Logger), trust.WithWrites(st.UpdateBolt)}
	if cfg.Prompter != nil {
		topts = append(topts, trust.WithPrompter(cfg.Prompter))
	}
	ts, err := trust.New(st.DB(), serverstore.TrustBucket, topts...)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	f := &Fleet{
		cfg:           cfg,
		log:           cfg.Logger.With().Str("component", "fleet").Logger(),
		store:         st,
		trust:         ts,
		keys:          ring,
		sessions:      newSessionSet(st, cfg.Logger.With().Str("component", "fleet").Logger()),
		mirrors:       newMirrorSet(cfg.StateDir, cfg.Logger),
		rand:          cfg.Rand,
		agents:        map[string]*agentState{},
		agentsChanged: make(chan struct{}),
		core:          newCoreState(),
		subs:          newSubscribers(cfg.Now),
		notify:        newNotifyQueue(),
	}
	f.mu.core = &f.core.mu
	mu = &f.mu
	if cfg.RegistryRoot != "" {
		f.reg = registry.NewServer(cfg.RegistryRoot, registry.WithLogger(cfg.Logger))
	}
	for _, a := range cfg.Agents {
		f.agents[a.Name] = newAgentState(a.Name, a.Addresses, sourceStatic)
	}
	if err := f.restore(); err != nil {
		return nil, errors.Join(err, st.Close())
	}
	d, err := dialer.New(cfg.Dialer, directory{f}, f.dialAgent, dialer.WithLogger(cfg.Logger), dialer.WithRand(f.newRand()))
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	f.dial = d
	return f, nil
}

// restore reads the instance registry, the tasks and the session
// projections back from the store.
func (f *Fleet) restore() error {
	var err error
	if f.serverID, err = f.store.ServerID(); err != nil {
		return err
	}
	recs, err := f.store.ListInstances()
	if err != nil {
		return err
	}
	if err := f.restoreSpawnIntents(recs); err != nil {
		return err
	}
	for _, rec := range recs {
		m, err := InstanceTable.Restore(InstanceState(rec.State))
		if err != nil {
			f.log.Warn().Err(err).Str("instance", rec.InstanceID).Msg("stored instance has an unknown state; skipped")
			continue
		}
		inst := newInstance(f, rec.InstanceID, rec.Machine, rec, m)
		f.applyManifest(inst)
		if InstanceTable.IsFinal(m.State()) {
			close(inst.ended)
		}
		f.addInstanceLocked(inst)
		if _, ok := f.agents[rec.Machine]; !ok {
			f.agents[rec.Machine] = newAgentState(rec.Machine, nil, sourceRestored)
		}
	}
	tasks, err := f.store.ListTasks()
	if err != nil {
		return err
	}
	for _, rec := range tasks {
		t, err := newTask(rec)
		if err != nil {
			f.log.Warn().Err(err).Str("task", rec.TaskID).Msg("stored task has an unknown state; skipped")
			continue
		}
		if rec.LastDone != nil {
			close(t.done)
		}
		f.core.addTask(t)
		if inst := f.core.instance(rec.InstanceID); inst != nil && t.open() {
			inst.openTask = rec.TaskID
			inst.maxRejects = rec.MaxRejects
			if t.m.State() == TaskRunning {
				// Whether its run started is known again from the events
				// the agent replays after the reconnect: all it has.
				inst.rec.LastSeenEventSeq = 0
			}
		}
	}
	// No agent is connected yet: reachable states become unreachable
	// (InstanceTable's rule that idle and running mean reachable).
	f.mu.Lock()
	for _, inst := range f.core.allInstances() {
		if inst.m.State() == StateAccepted {
			f.finishVerdictLocked(inst)
		}
	}
	for _, inst := range f.core.allInstances() {
		f.stepInstanceLocked(inst, coreInput{Kind: inConnLost})
	}
	f.mu.Unlock()
	for name := range f.agents {
		raw, err := f.store.GetProjection(name)
		if err != nil {
			continue // none stored
		}
		p := session.NewProjection()
		if err := p.UnmarshalJSON(raw); err != nil {
			f.log.Warn().Err(err).Str("agent", name).Msg("stored session projection unreadable; dropped")
			continue
		}
		f.sessions.restore(name, p)
	}
	return nil
}

// finishVerdictLocked carries out the disposition of a verdict that an
// older server stored in several writes and did not finish (the instance
// is still accepted): keep_idle, or the stop, sent once the agent is
// back.
func (f *Fleet) finishVerdictLocked(inst *instance) {
	var latest *task
	for t := range f.core.allTasks() {
		if t.rec.InstanceID == inst.id && t.rec.Disposition != "" && (latest == nil || t.rec.UpdatedAt.After(latest.rec.UpdatedAt)) {
			latest = t
		}
	}
	in := coreInput{Kind: inRestore, Disposition: transport.DispositionStop}
	if latest != nil {
		in.Disposition = transport.Disposition(latest.rec.Disposition)
	}
	if _, _, _, err := f.stepLocked(f.driveLocked(inst), in); err != nil {
		f.log.Error().Err(err).Str("instance", inst.id).Msg("half-done verdict not finished")
		return
	}
	f.log.Warn().Str("instance", inst.id).Str("disposition", string(in.Disposition)).Msg("finished a verdict a previous run left half done")
}

// applyManifest takes the instance's dialog answers and maxRejects from
// its bundle's manifest in the registry, when it is there (best effort:
// after a restart the bundle may be gone or republished).
func (f *Fleet) applyManifest(inst *instance) {
	if f.cfg.RegistryRoot == "" || inst.rec.Bundle == "" {
		return
	}
	man, err := registry.Show(f.cfg.RegistryRoot, inst.rec.Bundle)
	if err != nil {
		return
	}
	if man.Review != nil {
		if n, err := ResolveMaxRejects(man.Review.MaxRejects); err == nil {
			inst.maxRejects = n
		}
	}
	if man.UI != nil {
		inst.autoAnswer = man.UI.AutoAnswer
	}
	if inst.budget == nil {
		inst.budget = man.Budget
	}
}

// Start connects the fleet: the registry listener (when configured), the
// inbound listener (when configured), tailnet discovery, the dialer, and
// the notifier, which first hands the application every task_done a
// previous run recorded but did not finish notifying.
func (f *Fleet) Start(ctx context.Context) error {
	f.mu.Lock()
	if f.state != lifeNew {
		f.mu.Unlock()
		return fmt.Errorf("%w: Start called twice or after Close", ErrClosed)
	}
	f.setDirLocked(func() { f.state = lifeStarted })
	f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	f.mu.Unlock()

	pending, err := f.store.PendingNotifications()
	if err != nil {
		return err
	}
	for _, d := range pending {
		if d.TaskDone != nil {
			f.enqueueReport(*d.TaskDone, d.Order)
		}
	}
	f.wg.Add(1)
	go f.notifier()

	if f.cfg.RegistryListen != "" {
		if err := f.startRegistry(); err != nil {
			f.Close()
			return err
		}
	} else {
		f.ends.setRegistry(nil, f.cfg.RegistryURL)
	}
	if f.cfg.InboundListen != "" {
		if err := f.startInbound(); err != nil {
			f.Close()
			return err
		}
	}
	if f.cfg.Tailnet != nil {
		f.wg.Add(1)
		go f.discoverTailnet()
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := f.dial.Run(f.ctx); err != nil {
			f.log.Error().Err(err).Msg("dialer stopped")
		}
	}()
	return nil
}

func (f *Fleet) startRegistry() error {
	if f.reg == nil {
		return &ConfigError{Field: "RegistryRoot", Reason: "RegistryListen needs a registry root"}
	}
	ln, err := net.Listen("tcp", f.cfg.RegistryListen)
	if err != nil {
		return fmt.Errorf("fleet: registry listener: %w", err)
	}
	srv := &http.Server{Handler: f.reg, ReadHeaderTimeout: 10 * time.Second}
	url := f.cfg.RegistryURL
	if url == "" {
		url = "http://" + ln.Addr().String()
	}
	f.ends.setRegistry(srv, url)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.log.Error().Err(err).Msg("registry server stopped")
		}
	}()
	return nil
}

// RegistryHandler returns the bundle registry's HTTP handler, for a
// program that serves it itself (nil without Config.RegistryRoot).
func (f *Fleet) RegistryHandler() http.Handler {
	if f.reg == nil {
		return nil
	}
	return f.reg
}

// RegistryURL returns the URL agents fetch bundles from.
func (f *Fleet) RegistryURL() string { return f.ends.registryURL() }

// Trust returns the trust store (trust list / trust set). After changing
// a rejected machine's policy call Retry so that it is dialled again.
func (f *Fleet) Trust() *trust.Store { return f.trust }

// SetTrust records machine's policy and applies it at once to the agents
// of that machine connected now (Trust().Set alone takes effect at their
// next connection): a downgrade holds from the next operation, and deny
// ends their connections. A policy that is none of allow, steer, deny is a
// *trust.BadPolicyError (errors.Is trust.ErrBadPolicy) and changes nothing.
func (f *Fleet) SetTrust(machine string, p trust.Policy) (trust.Decision, error) {
	d, err := f.trust.Set(machine, p)
	if err != nil {
		return d, err
	}
	var drop []*transport.Conn
	f.mu.lockAgents()
	for _, a := range f.agents {
		if a.established() && a.identity.Machine == machine {
			f.setDirLocked(func() { a.policy = p })
			if p == trust.Deny {
				drop = append(drop, a.conn)
			}
		}
	}
	f.mu.Unlock()
	for _, c := range drop {
		_ = c.Close()
	}
	return d, nil
}

// Close stops everything the fleet started: connections (workers keep
// running under their agents), listeners, the dialer, the notifier, and
// closes the state file. It is idempotent and returns the first error.
func (f *Fleet) Close() error {
	f.closeOnce.Do(func() {
		f.mu.Lock()
		started := f.state == lifeStarted
		f.setDirLocked(func() { f.state = lifeClosed })
		var conns []*transport.Conn
		for _, a := range f.agents {
			if a.conn != nil {
				conns = append(conns, a.conn)
			}
			if a.m.Can(transport.EventClose) { // rejected and closed are final
				f.fireConnLocked(a, transport.EventClose, nil)
			}
		}
		lns, srv := f.ends.closers()
		f.subs.close()
		f.agentsChangedLocked()
		f.mu.Unlock()
		if started {
			f.cancel()
		}
		for _, ln := range lns {
			_ = ln.Close()
		}
		if srv != nil {
			_ = srv.Close()
		}
		for _, c := range conns {
			_ = c.Close()
		}
		f.notify.close()
		f.wg.Wait()
		f.mirrors.close()
		f.sessions.persistAll() // incremental reports are kept in memory only
		f.closeErr = f.store.Close()
	})
	return f.closeErr
}

// ---- ids ----

func (f *Fleet) newRand() *rand.Rand {
	f.randMu.Lock()
	defer f.randMu.Unlock()
	return rand.New(rand.NewPCG(f.rand.Uint64(), f.rand.Uint64()))
}

func (f *Fleet) hex(n int) string {
	f.randMu.Lock()
	defer f.randMu.Unlock()
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[f.rand.IntN(16)]
	}
	return string(b)
}

// newTaskID mints "t-<ms epoch in base36>-<6 hex>": the reference's form
// plus a random suffix, so that two tasks in one millisecond differ.
func (f *Fleet) newTaskID() string {
	return "t-" + strconv.FormatInt(f.cfg.Now().UnixMilli(), 36) + "-" + f.hex(6)
}

// newTraceID mints the trace id of a spawn.
func (f *Fleet) newTraceID() string { return "tr-" + f.hex(16) }

// ---- the instance machine ----

// addInstanceLocked registers inst under its id, in the fleet and in its
// agent's index. f.mu must be held (or the fleet not yet shared).
func (f *Fleet) addInstanceLocked(inst *instance) { f.core.addInstance(inst) }

// transitionLocked fires ev on inst's machine, logs and publishes the
// transition; it persists nothing. A stale event is logged and dropped
// (false). f.mu must be held.
func (f *Fleet) transitionLocked(inst *instance, ev InstanceEvent) bool {
	from := inst.m.State()
	if err := inst.m.Fire(ev); err != nil {
		var stale *fsmkit.StaleEventError
		if errors.As(err, &stale) {
			f.log.Debug().Str("instance", inst.id).Str("event", string(ev)).Str("state", string(from)).Msg("stale instance event dropped")
		}
		return false
	}
	to := inst.m.State()
	inst.rec.State = string(to)
	inst.gen++
	msg := "instance transition"
	switch {
	case ev == EventSpawned:
		msg = "worker spawned"
	case ev == EventConnectionLost:
		msg = "worker unreachable: its agent is lost"
	case InstanceTable.IsFinal(to):
		msg = "worker ended"
	}
	f.log.Info().Str("instance", inst.ref()).Str("agent", inst.agent).Str("cwd", inst.rec.Cwd).Str("bundle", inst.rec.Bundle).
		Str("traceId", inst.rec.TraceID).Str("event", string(ev)).Str("from", string(from)).Str("to", string(to)).
		Str("reason", inst.rec.EndReason).Msg(msg)
	f.publishLocked(Change{Kind: ChangeInstanceState, Agent: inst.agent, InstanceID: inst.ref(), TaskID: inst.openTask,
		Event: string(ev), From: string(from), To: string(to)})
	return true
}

// reachabilityState reports the states that a restart restores as
// unreachable (InstanceTable: idle and running mean reachable).
func reachabilityState(s InstanceState) bool {
	return s == StateIdle || s == StateRunning || s == StateUnreachable
}

// persistInstanceLocked queues the write of inst's record (drive.go: it
// is committed outside f.mu, in the order queued); a failure is logged.
func (f *Fleet) persistInstanceLocked(inst *instance) {
	if inst.id == "" {
		return // not spawned yet: spawn states are not persisted
	}
	f.persistLocked(nil, inst, true)
}

// persistTaskLocked queues the write of t's record; a failure is logged.
func (f *Fleet) persistTaskLocked(t *task) *serverstore.Pending {
	return f.persistLocked(t, nil, false)
}

// fireTaskLocked fires ev on the task's machine and publishes the
// change; the plan that fired it persists it. A stale event is logged and
// dropped (false). f.mu must be held.
func (f *Fleet) fireTaskLocked(t *task, ev TaskEvent) bool {
	from := t.m.State()
	if err := t.m.Fire(ev); err != nil {
		f.log.Debug().Str("task", t.rec.TaskID).Str("event", string(ev)).Str("state", string(from)).Msg("stale task event dropped")
		return false
	}
	t.rec.State = string(t.m.State())
	f.publishLocked(Change{Kind: ChangeTaskState, Agent: t.rec.Machine, InstanceID: t.rec.InstanceID, TaskID: t.rec.TaskID,
		Event: string(ev), From: string(from), To: t.rec.State})
	return true
}

// ---- small helpers ----

func rawCommand(id string, fields map[string]any) json.RawMessage {
	m := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		m[k] = v
	}
	if id != "" {
		m["id"] = id
	}
	b, _ := json.Marshal(m)
	return b
}
