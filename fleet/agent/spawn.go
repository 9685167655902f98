package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/fleet/agent/internal/fsservice"
	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
)

// spawn_error codes. The TypeScript agent knows only max_workers and
// spawn_failed; the others are pifleet's refusals of a spawn it cannot
// honour safely, all sent before any worker process starts.
const (
	CodeMaxWorkers         = "max_workers"
	CodeSpawnFailed        = "spawn_failed"
	CodeBadCwd             = "bad_cwd"
	CodeInvalidBundle      = "invalid_bundle"
	CodeNoRegistry         = "no_registry"
	CodeBadSession         = "bad_session"
	CodeBundleHashMismatch = "bundle_hash_mismatch"
	CodeBundleSyncFailed   = "bundle_sync_failed"
	CodePlatformMismatch   = "platform_mismatch"
	CodeNoUsableModel      = "no_usable_model"
	CodeModelProbeFailed   = "model_probe_failed"
	CodeSessionPinned      = "session_pinned"
	CodeSessionBusy        = "session_busy"
	CodeSpawnCancelled     = "spawn_cancelled"
)

// SpawnError is a refused spawn: its Code goes into spawn_error.
type SpawnError struct {
	Code    string
	Message string
}

func (e *SpawnError) Error() string { return e.Code + ": " + e.Message }

func refuse(code, format string, args ...any) *SpawnError {
	return &SpawnError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// newInstanceID returns "i-" and 12 lowercase hex digits.
func newInstanceID() string {
	var b [6]byte
	rand.Read(b[:])
	return "i-" + hex.EncodeToString(b[:])
}

// reserve checks cwd and capacity and takes a worker slot (AC-3.14).
func (a *Agent) reserve(f *transport.SpawnFrame) *SpawnError {
	fi, err := os.Stat(f.Cwd)
	switch {
	case f.Cwd == "" || !filepath.IsAbs(f.Cwd):
		return refuse(CodeBadCwd, "cwd %q is not an absolute path", f.Cwd)
	case err != nil:
		return refuse(CodeBadCwd, "cwd %s: %v", f.Cwd, errors.Unwrap(err))
	case !fi.IsDir():
		return refuse(CodeBadCwd, "cwd %s is not a directory", f.Cwd)
	}
	if err := bundle.ValidName(f.Bundle); err != nil {
		return refuse(CodeInvalidBundle, "%v", err)
	}
	if f.FromSession != "" {
		if !filepath.IsAbs(f.FromSession) {
			return refuse(CodeBadSession, "fromSession %q is not an absolute path", f.FromSession)
		}
		sum, err := session.Summarize(f.FromSession)
		if err != nil {
			return refuse(CodeBadSession, "fromSession %s is not a session file: %v", f.FromSession, err)
		}
		if f.SessionMode == transport.SessionAttach && session.KindOf(sum.Name) == session.KindBaseline {
			return refuse(CodeSessionPinned, "session %s is the pinned baseline %q: resume it as a clone", f.FromSession, sum.Name)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if f.FromSession != "" && f.SessionMode == transport.SessionAttach {
		// Two workers appending to one file would interleave two trees.
		for _, in := range a.instances {
			in.mu.Lock()
			busy := in.state == transport.InstanceRunning && in.sessionPath != "" && filepath.Clean(in.sessionPath) == filepath.Clean(f.FromSession)
			in.mu.Unlock()
			if busy {
				return refuse(CodeSessionBusy, "session %s is in use by instance %s", f.FromSession, in.id)
			}
		}
	}
	if a.cfg.MaxWorkers > 0 {
		n := a.spawning
		for _, in := range a.instances {
			if in.running() {
				n++
			}
		}
		if n >= a.cfg.MaxWorkers {
			return refuse(CodeMaxWorkers, "machine at capacity: %d/%d workers running", n, a.cfg.MaxWorkers)
		}
	}
	a.spawning++
	return nil
}

func (a *Agent) release() {
	a.mu.Lock()
	a.spawning--
	a.mu.Unlock()
}

// registryFor is the registry a spawn provisions from.
func (a *Agent) registryFor(env map[string]string) string {
	if r := env["PI_FLEET_SERVER"]; r != "" {
		return r
	}
	return a.cfg.Registry
}

// provision syncs the bundle into the cache (reporting progress), then
// checks the platform.
func (a *Agent) provision(ctx context.Context, p *peer, spawnID, name, location, pinned string) (*cache.Result, *SpawnError) {
	if location == "" {
		return nil, refuse(CodeNoRegistry, "no bundle registry: the spawn's env has no PI_FLEET_SERVER and the agent has none configured")
	}
	reg, err := registry.Open(location)
	if err != nil {
		return nil, refuse(CodeNoRegistry, "registry %q: %v", location, err)
	}
	progress := func(pr cache.Progress) {
		if p == nil || !p.pifleet.Load() {
			return
		}
		_ = p.conn.TrySend(&transport.SpawnProgressFrame{SpawnID: spawnID, Phase: transport.SpawnProvisioning, Bundle: name,
			FilesTotal: new(float64(pr.FilesTotal)), FilesFetched: new(float64(pr.Fetched)), FilesReused: new(float64(pr.Reused)),
			BytesFetched: new(float64(pr.FetchedBytes)), BytesReused: new(float64(pr.ReusedBytes)),
			Message: string(pr.State)})
	}
	res, err := a.cache.Sync(ctx, reg, name, cache.SyncOptions{PinnedHash: pinned, Progress: progress})
	if err != nil {
		var pe *cache.PinError
		if errors.As(err, &pe) {
			return nil, refuse(CodeBundleHashMismatch, "%v", err)
		}
		return nil, refuse(CodeBundleSyncFailed, "%v", err)
	}
	if res.Status == cache.StatusDegraded && p != nil && p.pifleet.Load() {
		_ = p.conn.TrySend(&transport.SpawnProgressFrame{SpawnID: spawnID, Phase: transport.SpawnDegraded, Bundle: name,
			BundleHash: res.BundleHash, Message: fmt.Sprintf("registry unavailable (%v); using the cached copy", res.RegistryErr)})
	}
	if err := res.Manifest.CheckPlatform(Platform()); err != nil {
		var pe *bundle.PlatformError
		if errors.As(err, &pe) {
			return nil, refuse(CodePlatformMismatch, "bundle %q targets [%s] but %s runs %s",
				name, strings.Join(pe.Supported, ", "), a.cfg.Machine, pe.Platform)
		}
		return nil, refuse(CodePlatformMismatch, "%v", err)
	}
	return res, nil
}

// modelCandidates lists the models to try, in order: the spawn's, else
// the bundle's primary and fallbacks, else the machine's default.
func (a *Agent) modelCandidates(f *transport.SpawnFrame, res *cache.Result) []transport.ModelRef {
	if f.Model != nil {
		return []transport.ModelRef{*f.Model}
	}
	if mp := res.Resources.Model; mp != nil {
		out := []transport.ModelRef{fromBundleModel(mp.Primary)}
		for _, fb := range mp.Fallbacks {
			out = append(out, fromBundleModel(fb))
		}
		return out
	}
	if a.cfg.DefaultModel != nil {
		return []transport.ModelRef{*a.cfg.DefaultModel}
	}
	return nil
}

func fromBundleModel(m bundle.ModelRef) transport.ModelRef {
	return transport.ModelRef{Provider: m.Provider, ID: m.ID, Thinking: m.Thinking}
}

// launch describes a worker command line.
type launch struct {
	res        *cache.Result
	model      *transport.ModelRef
	tools      []string // nil: the bundle's
	session    string   // --session file (restart, fromSession)
	sessionDir string   // --session-dir otherwise
	noSession  bool     // the model probe
	extraEnv   map[string]string
	instanceID string
	traceID    string
	pinnedHash string
	bundleName string
}

// command builds pi's command line from the bundle's resources.
func (a *Agent) command(l launch) []string {
	argv := slices.Clone(a.cfg.PiCommand)
	if a.hooks.command != nil {
		argv = a.hooks.command(argv)
	}
	argv = append(argv, "--mode", "rpc")
	argv = append(argv, a.cfg.PiArgs...)
	r := l.res.Resources
	for _, e := range r.Extensions {
		argv = append(argv, "-e", e)
	}
	for _, s := range r.Skills {
		argv = append(argv, "--skill", s)
	}
	for _, p := range r.Prompts {
		argv = append(argv, "--prompt-template", p)
	}
	tools := r.Tools
	if l.tools != nil {
		tools = l.tools
	}
	if tools != nil {
		argv = append(argv, "--tools", strings.Join(tools, ","))
	}
	if l.model != nil {
		argv = append(argv, "--provider", l.model.Provider, "--model", l.model.ID)
		if l.model.Thinking != "" {
			argv = append(argv, "--thinking", l.model.Thinking)
		}
	}
	switch {
	case l.noSession:
		argv = append(argv, "--no-session")
	case l.session != "":
		argv = append(argv, "--session", l.session)
	default:
		argv = append(argv, "--session-dir", l.sessionDir)
	}
	return argv
}

// environment is the worker's: the agent's, the spawn's env, then the
// PI_FLEET_* contract (reference 1.9, 1.23).
func (a *Agent) environment(l launch) []string {
	env := slices.Clone(a.cfg.Env)
	set := func(k, v string) {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
		env = append(env, k+"="+v)
	}
	keys := make([]string, 0, len(l.extraEnv))
	for k := range l.extraEnv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		set(k, l.extraEnv[k])
	}
	set("PI_FLEET_BUNDLE", l.bundleName)
	if l.pinnedHash != "" {
		set("PI_FLEET_BUNDLE_HASH", l.pinnedHash)
	}
	set("PI_FLEET_CACHE", a.cfg.CacheDir)
	if l.instanceID != "" {
		set("PI_FLEET_INSTANCE_ID", l.instanceID)
	}
	if l.traceID != "" {
		set("PI_FLEET_TRACE_ID", l.traceID)
	}
	return env
}

// sessionDirFor is where pi keeps the sessions of cwd under the sessions
// root, named the way pi names it ("--home-u-repo--"), so that listing and
// search find the workers' sessions with everyone else's.
func (a *Agent) sessionDirFor(cwd string) string {
	name := strings.TrimLeft(cwd, `/\`)
	name = strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(name)
	return filepath.Join(a.cfg.SessionsRoot, "--"+name+"--")
}

// spawnKey names an unanswered spawn: its request id is the peer's.
type spawnKey struct {
	peer    *peer
	spawnID string
}

// errSpawnCancelled is the cause of a spawn's context ended by
// spawn_cancel.
var errSpawnCancelled = errors.New("the server cancelled the spawn")

// cancellable returns the context a spawn runs under: spawn_cancel from
// the same peer ends it. spawn forgets it once answered.
func (a *Agent) cancellable(ctx context.Context, p *peer, spawnID string) context.Context {
	if spawnID == "" {
		return ctx // no id: no spawn_cancel can name it
	}
	sctx, cancel := context.WithCancelCause(ctx)
	a.mu.Lock()
	a.cancels[spawnKey{p, spawnID}] = cancel
	a.mu.Unlock()
	return sctx
}

// cancelSpawn gives up the peer's spawn spawnID if it is still unanswered:
// its provisioning or start fails, whatever was started for it ends, and
// its answer is spawn_error spawn_cancelled.
func (a *Agent) cancelSpawn(p *peer, spawnID string) {
	a.mu.Lock()
	cancel := a.cancels[spawnKey{p, spawnID}]
	a.mu.Unlock()
	if cancel == nil {
		a.log.Debug().Str("spawnId", spawnID).Msg("spawn_cancel for a spawn already answered")
		return
	}
	a.log.Info().Str("spawnId", spawnID).Msg("spawn cancelled by the server")
	cancel(errSpawnCancelled)
}

func spawnCancelled(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errSpawnCancelled)
}

// spawn runs one spawn request to its answer: spawned, or spawn_error
// before any worker process started (or once it was ended again, after a
// spawn_cancel).
func (a *Agent) spawn(ctx context.Context, p *peer, f *transport.SpawnFrame) transport.Frame {
	in, serr := a.startInstance(ctx, p, f)
	a.mu.Lock()
	cancel := a.cancels[spawnKey{p, f.ID}]
	delete(a.cancels, spawnKey{p, f.ID})
	a.mu.Unlock()
	if cancel != nil {
		defer cancel(nil)
	}
	if serr != nil && spawnCancelled(ctx) {
		serr = refuse(CodeSpawnCancelled, "the spawn was cancelled by the server")
	}
	if serr != nil {
		a.log.Warn().Str("code", serr.Code).Str("msg", serr.Message).Str("bundle", f.Bundle).Msg("spawn refused")
		e := &transport.SpawnErrorFrame{Code: serr.Code, Message: serr.Message}
		e.ID, e.TraceID = f.ID, f.TraceID
		return e
	}
	out := &transport.SpawnedFrame{Instance: in.info()}
	out.ID, out.TraceID = f.ID, f.TraceID
	return out
}

func (a *Agent) startInstance(ctx context.Context, p *peer, f *transport.SpawnFrame) (*instance, *SpawnError) {
	if serr := a.reserve(f); serr != nil {
		return nil, serr
	}
	defer a.release()
	spawnID := f.ID
	if p != nil && p.pifleet.Load() {
		_ = p.conn.TrySend(&transport.SpawnProgressFrame{SpawnID: spawnID, Phase: transport.SpawnAccepted, Bundle: f.Bundle})
	}
	res, serr := a.provision(ctx, p, spawnID, f.Bundle, a.registryFor(f.Env), f.BundleHash)
	if serr != nil {
		return nil, serr
	}
	id := newInstanceID()
	tree, serr := a.isolate(ctx, f, id)
	if serr != nil {
		return nil, serr
	}
	cwd := f.Cwd // where the worker runs: its worktree when isolated
	if tree != nil {
		cwd = tree.Cwd
		started := false
		defer func() {
			if !started { // the spawn failed after the worktree was made
				a.dropWorktree(ctx, tree, true)
			}
		}()
		defer func() { started = a.lookup(id) != nil }()
	}
	l := launch{res: res, extraEnv: f.Env, instanceID: id, traceID: f.TraceID, pinnedHash: f.BundleHash,
		bundleName: f.Bundle, sessionDir: a.sessionDirFor(f.Cwd)}
	if f.FromSession != "" {
		l.session = f.FromSession
	}
	// Model: resolve against what pi can use with this bundle, before the
	// worker starts (AC-4.5).
	if cands := a.modelCandidates(f, res); len(cands) > 0 {
		probe := l
		probe.noSession, probe.model, probe.instanceID = true, nil, ""
		avail, err := a.availableModels(ctx, a.command(probe), a.environment(probe), f.Cwd)
		if err != nil && !errors.Is(err, ErrProbe) {
			return nil, refuse(CodeSpawnFailed, "%v", err) // cancelled
		}
		if err != nil {
			return nil, refuse(CodeModelProbeFailed, "cannot learn the usable models: %v", err)
		}
		m, ok := chooseModel(cands, avail)
		if !ok {
			return nil, refuse(CodeNoUsableModel, "none of the models tried is usable here: tried %s; available: %s",
				modelNames(cands), modelNames(avail))
		}
		l.model = &m
	}
	if p != nil && p.pifleet.Load() {
		_ = p.conn.TrySend(&transport.SpawnProgressFrame{SpawnID: spawnID, Phase: transport.SpawnStarting, Bundle: f.Bundle, BundleHash: res.BundleHash})
	}
	if err := os.MkdirAll(l.sessionDir, 0o700); err != nil {
		return nil, refuse(CodeSpawnFailed, "session dir: %v", err)
	}
	spec := a.workerSpec(id, cwd, l, f.Budget)
	in := &instance{a: a, id: id, cwd: cwd, log: a.log.With().Str("instanceId", id).Logger(),
		fs:   fsservice.New(cwd, fsservice.WithAccess(a.cfg.FsAccess), fsservice.WithLogger(a.cfg.Logger)),
		spec: spec, bundle: f.Bundle, bundleHash: res.BundleHash, res: res, model: l.model, traceID: f.TraceID,
		spawnID: f.ID, state: transport.InstanceRunning, tree: tree}
	// Durable before the start: the record (marked spawning, so that a
	// restart rolls the spawn back), the spec, and, from the worker's
	// OnLaunch, the shim's handle. An agent killed at any point from here
	// leaves nothing its successor cannot find and stop.
	rec := agentstore.Instance{InstanceID: id, Cwd: cwd, Bundle: f.Bundle, BundleHash: res.BundleHash,
		State: transport.InstanceRunning, TraceID: f.TraceID, SpawnID: f.ID, Spawning: true}
	if l.model != nil {
		rec.Model = &agentstore.Model{Provider: l.model.Provider, ID: l.model.ID, Thinking: l.model.Thinking}
	}
	if f.Budget != nil {
		rec.Budget.MaxCost = f.Budget.MaxCost
	}
	if _, err := a.store.PutInstance(rec); err != nil {
		return nil, refuse(CodeSpawnFailed, "cannot record the instance: %v", err)
	}
	if err := a.saveSpec(id, spec, nil); err != nil {
		a.forget(id)
		return nil, refuse(CodeSpawnFailed, "cannot record the worker's spec: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, a.cfg.ReadyTimeout)
	defer cancel()
	a.hooks.spawnPoint("before-start")
	w, err := worker.Start(sctx, spec)
	if err != nil {
		a.forget(id)
		return nil, refuse(CodeSpawnFailed, "%v", err)
	}
	in.attach(w)
	a.persistWorker(id, w)
	a.hooks.spawnPoint("started")
	if f.FromSession != "" && f.SessionMode != transport.SessionAttach {
		// Never write into the source session (a baseline): clone it at
		// once and work on the copy (seed §8). A worker that cannot clone
		// is stopped before anyone sees it: it would write the source.
		if err := in.cloneSource(sctx, f.FromSession); err != nil {
			if _, serr := w.Stop(ctx); serr != nil {
				in.log.Warn().Err(serr).Msg("stop after a failed clone")
			}
			<-in.pumpDone
			a.forget(id)
			return nil, refuse(CodeSpawnFailed, "clone of %s: %v", f.FromSession, err)
		}
	} else if f.FromSession != "" {
		in.refreshSession(sctx)
	}
	if pinsModel(res) {
		// From before anyone can send the worker a set_model.
		in.pinModel(true)
	}
	a.hooks.spawnPoint("before-complete")
	// The spawn is complete once this is stored: from then on a restart
	// re-adopts the worker. A worker whose completion cannot be stored
	// is stopped here, as a restart would.
	_, err = a.store.UpdateInstance(id, func(r *agentstore.Instance) error {
		r.Spawning = false
		return nil
	})
	a.mu.Lock()
	closed, cancelled := a.closed, spawnCancelled(ctx)
	// The connection that asked for the worker closed (a server killed
	// between its spawn and this answer): the answer reaches nobody, and a
	// restarted server knows no such spawn.
	peerGone := ctx.Err() != nil && !cancelled
	if !closed && !cancelled && !peerGone && err == nil {
		a.instances[id] = in
		a.order = append(a.order, id)
	}
	a.mu.Unlock()
	if closed || cancelled || peerGone || err != nil {
		// Nobody would ever learn of this worker: the agent shuts down,
		// the server gave the spawn up, or the spawn cannot be recorded
		// complete. (A spawn_cancel after this point finds the spawn
		// answered: the server stops the worker.)
		if _, serr := w.Stop(context.WithoutCancel(ctx)); serr != nil {
			in.log.Warn().Err(serr).Msg("stop of a worker whose spawn did not complete")
		}
		<-in.pumpDone
		a.forget(id)
		a.hooks.spawnPoint("abandoned")
		switch {
		case peerGone:
			return nil, refuse(CodeSpawnCancelled, "the connection that asked for the spawn closed before its answer")
		case cancelled:
			return nil, refuse(CodeSpawnCancelled, "the spawn was cancelled by the server")
		case err != nil:
			return nil, refuse(CodeSpawnFailed, "cannot record the instance: %v", err)
		}
		return nil, refuse(CodeSpawnFailed, "the agent is shutting down")
	}
	in.recordSession()
	a.rescanSessions()
	// Listed from here on, under its spawn id, though its spawned is not
	// sent yet: a connection that closes now leaves a worker the server
	// finds in its next listing.
	a.hooks.spawnPoint("before-answer")
	return in, nil
}

// cloneSource makes the worker, started on source, continue in a new
// session file holding source's active branch (pi's clone); the new
// file's header names source as its parentSession.
func (in *instance) cloneSource(ctx context.Context, source string) error {
	line, err := in.call(ctx, map[string]any{"type": "clone"})
	if err != nil {
		return err
	}
	var r struct {
		Data struct {
			Cancelled bool `json:"cancelled"`
		} `json:"data"`
	}
	if json.Unmarshal(line, &r) == nil && r.Data.Cancelled {
		return errors.New("the worker cancelled the clone")
	}
	in.refreshSession(ctx)
	in.mu.Lock()
	path := in.sessionPath
	in.mu.Unlock()
	if path == "" || filepath.Clean(path) == filepath.Clean(source) {
		return fmt.Errorf("the worker still works on %s after clone", source)
	}
	return nil
}

// workerSpec is the supervision spec of a worker.
func (a *Agent) workerSpec(id, cwd string, l launch, b *transport.Budget) worker.Spec {
	spec := worker.Spec{
		InstanceID:    id,
		Cwd:           cwd,
		Command:       a.command(l),
		Env:           a.environment(l),
		StateDir:      filepath.Join(a.cfg.StateDir, "workers"),
		ShimCommand:   a.cfg.ShimCommand,
		RingSize:      a.cfg.EventRing,
		StopGrace:     a.cfg.StopGrace,
		DialogTimeout: a.cfg.DialogTimeout,
		Log:           a.cfg.Logger.With().Str("instanceId", id).Logger(),
		OnLaunch:      a.onLaunch(id),
	}
	if mb := l.res.Resources.Budget; mb != nil {
		if mb.MaxCost != nil {
			spec.Budget.MaxCost = *mb.MaxCost
		}
		if mb.MaxTurns != nil {
			spec.Budget.MaxTurns = int(*mb.MaxTurns)
		}
		if mb.MaxMinutes != nil {
			spec.Budget.MaxMinutes = *mb.MaxMinutes
		}
	}
	// The spawn's own limits win over the manifest's, field by field, as
	// the spawn's model wins over the bundle's.
	if b != nil {
		if b.MaxCost != nil {
			spec.Budget.MaxCost = *b.MaxCost
		}
		if b.MaxTurns != nil {
			spec.Budget.MaxTurns = int(*b.MaxTurns)
		}
		if b.MaxMinutes != nil {
			spec.Budget.MaxMinutes = *b.MaxMinutes
		}
	}
	if ui := l.res.Resources.UI; ui != nil && len(ui.AutoAnswer) > 0 {
		spec.AutoAnswer = map[string]any{}
		for _, aa := range ui.AutoAnswer {
			if aa.Bool != nil {
				spec.AutoAnswer[aa.Key] = *aa.Bool
			} else {
				spec.AutoAnswer[aa.Key] = aa.Text
			}
		}
	}
	return spec
}

// refreshSession asks the worker for its session file.
func (in *instance) refreshSession(ctx context.Context) {
	line, err := in.call(ctx, map[string]any{"type": "get_state"})
	if err != nil {
		in.log.Warn().Err(err).Msg("get_state")
		return
	}
	var r struct {
		Data struct {
			SessionFile string `json:"sessionFile"`
		} `json:"data"`
	}
	if json.Unmarshal(line, &r) == nil && r.Data.SessionFile != "" {
		in.mu.Lock()
		in.sessionPath = r.Data.SessionFile
		in.mu.Unlock()
	}
}

// recordSession stores the session path in the registry (a lost worker is
// reported with it: resumable).
func (in *instance) recordSession() {
	in.mu.Lock()
	path := in.sessionPath
	in.mu.Unlock()
	if path == "" {
		return
	}
	if _, err := in.a.store.UpdateInstance(in.id, func(r *agentstore.Instance) error {
		r.SessionPath = path
		return nil
	}); err != nil {
		in.log.Warn().Err(err).Msg("cannot record the session path")
	}
}
