package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/rebundle"
	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/transport"
)

// rebundle switches a running worker to another bundle on the same session
// (seed §10, AC-4.1): sync B; when B is cached, restart the worker on its
// session file with B's resources (same instance id, history kept); when
// the sync fails, the worker keeps bundle A and the error is reported.
func (a *Agent) rebundle(ctx context.Context, f *transport.RebundleFrame) transport.Frame {
	in := a.lookup(f.InstanceID)
	if in == nil || !in.running() {
		return errorFrame(f, CodeUnknownInstance, "no running instance "+f.InstanceID)
	}
	in.mu.Lock()
	from := rebundle.Bundle{Name: in.bundle, Hash: in.bundleHash}
	in.mu.Unlock()
	location := f.Registry
	if location == "" {
		location = a.cfg.Registry
	}
	sync := func(ctx context.Context, name string) (*cache.Result, error) {
		res, serr := a.provision(ctx, nil, "", name, location, f.BundleHash)
		if serr != nil {
			return nil, serr
		}
		return res, nil
	}
	restart := func(ctx context.Context, to *cache.Result) error {
		return in.restart(ctx, to, nil, to.Bundle)
	}
	log := in.log
	out, err := rebundle.Switch(ctx, from, f.Bundle, sync, restart, rebundle.Options{Log: &log})
	reply := &transport.RebundledFrame{InstanceID: in.id, Switched: out.Switched, Bundle: out.Running.Name, BundleHash: out.Running.Hash}
	if out.Sync != nil {
		reply.Degraded = out.Sync.Status == cache.StatusDegraded
	}
	if err == nil && out.Switched && pinsModel(out.Sync) {
		in.pinModel(true) // the new bundle declares the pin
	}
	if err != nil {
		code := CodeRestartFailed
		if se, ok := asSpawnError(err); ok {
			code = se.Code
		}
		reply.Error = &transport.FsError{Code: code, Message: err.Error()}
	}
	reply.ID = f.ID
	return reply
}

func asSpawnError(err error) (*SpawnError, bool) {
	for err != nil {
		if se, ok := err.(*SpawnError); ok {
			return se, true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return nil, false
		}
		err = u.Unwrap()
	}
	return nil, false
}

// setTools restarts the worker on its session with --tools (AC-4.2).
func (a *Agent) setTools(ctx context.Context, f *transport.SetToolsFrame) transport.Frame {
	in := a.lookup(f.InstanceID)
	if in == nil || !in.running() {
		return errorFrame(f, CodeUnknownInstance, "no running instance "+f.InstanceID)
	}
	in.mu.Lock()
	res, name := in.res, in.bundle
	in.mu.Unlock()
	if res == nil {
		// Re-adopted: the bundle's resources are read back from the cache.
		p, err := a.cache.Pointer(name)
		if err != nil || p == nil {
			return errorFrame(f, CodeRestartFailed, fmt.Sprintf("bundle %q is not in the cache: %v", name, err))
		}
		r, err := p.Manifest.Resources(a.cache.Dir(p.BundleHash))
		if err != nil {
			return errorFrame(f, CodeRestartFailed, err.Error())
		}
		res = &cache.Result{Bundle: name, BundleHash: p.BundleHash, Dir: a.cache.Dir(p.BundleHash), Manifest: p.Manifest, Resources: r}
	}
	tools := slices.Clone(f.Tools)
	if tools == nil {
		tools = []string{}
	}
	if err := in.restart(ctx, res, tools, name); err != nil {
		return errorFrame(f, CodeRestartFailed, err.Error())
	}
	out := &transport.ToolsSetFrame{InstanceID: in.id, Tools: tools}
	out.ID = f.ID
	return out
}

// restart runs the worker again on its session file with res's resources
// (and tools, when not nil), keeping instance id, model and history.
func (in *instance) restart(ctx context.Context, res *cache.Result, tools []string, bundleName string) error {
	in.mu.Lock()
	w := in.w
	spec := in.spec
	model := in.model
	path := in.sessionPath
	traceID := in.traceID
	if tools == nil {
		tools = in.tools
	}
	in.mu.Unlock()
	if w == nil {
		return fmt.Errorf("agent: instance %s has no worker", in.id)
	}
	a := in.a
	l := launch{res: res, model: model, tools: tools, session: path, sessionDir: a.sessionDirFor(in.cwd),
		instanceID: in.id, traceID: traceID, bundleName: bundleName}
	next := a.workerSpec(in.id, in.cwd, l, nil)
	next.Budget = spec.Budget
	in.mu.Lock()
	in.restarting = true
	done := in.pumpDone
	in.mu.Unlock()
	err := w.Restart(ctx, next)
	var re *worker.RestartError
	if errors.As(err, &re) && !re.Restored {
		// Neither the new spec nor the previous one starts: the worker
		// has exited, its open task ends aborted.
		<-done // the failed worker's stream has ended
		in.mu.Lock()
		in.restarting = false
		in.mu.Unlock()
		in.log.Error().Err(err).Msg("the worker could not be brought back on its previous bundle")
		in.exited(w, &worker.Exit{Code: -1, StderrTail: err.Error()})
		return err
	}
	in.mu.Lock()
	in.restarting = false
	in.mu.Unlock()
	if err != nil {
		// Restored (or never stopped): the worker runs bundle A as
		// before, on its session, with the same event stream.
		in.mu.Lock()
		in.pid = w.Snapshot().Pid
		in.mu.Unlock()
		a.persistWorker(in.id, w)
		return err
	}
	snap := w.Snapshot()
	in.mu.Lock()
	in.spec, in.res, in.bundle, in.bundleHash, in.tools = next, res, bundleName, res.BundleHash, tools
	in.pid = snap.Pid
	in.mu.Unlock()
	a.persistWorker(in.id, w)
	_ = a.saveSpec(in.id, next, tools) // logged; the running worker is unaffected
	_, _ = a.store.UpdateInstance(in.id, func(r *agentstore.Instance) error {
		r.Bundle, r.BundleHash = bundleName, res.BundleHash
		return nil
	})
	return nil
}

// modelPin pins or unpins a worker's model (AC-4.7).
func (a *Agent) modelPin(f *transport.ModelPinFrame) transport.Frame {
	in := a.lookup(f.InstanceID)
	if in == nil || !in.running() {
		return errorFrame(f, CodeUnknownInstance, "no running instance "+f.InstanceID)
	}
	m := in.pinModel(f.Pin)
	out := &transport.ModelPinnedFrame{InstanceID: in.id, Pin: f.Pin}
	if m.ID != "" {
		out.Model = &m
	}
	out.ID = f.ID
	return out
}

// pinsModel reports whether the bundle's manifest pins the worker's model
// (model.pin: true).
func pinsModel(res *cache.Result) bool {
	if res == nil || res.Manifest == nil || res.Manifest.Model == nil {
		return false
	}
	p := res.Manifest.Model.Pin
	return p != nil && *p
}

// pinModel pins (or unpins) the worker's model and records it, so that a
// re-adopted worker stays pinned. It returns the model concerned.
func (in *instance) pinModel(pin bool) transport.ModelRef {
	m := in.applyPin(pin)
	if _, err := in.a.store.UpdateInstance(in.id, func(r *agentstore.Instance) error {
		r.ModelPinned = pin
		return nil
	}); err != nil {
		in.log.Warn().Err(err).Bool("pin", pin).Msg("cannot record the model pin; it holds until the agent restarts")
	}
	return m
}

// applyPin pins (or unpins) the worker's model to the one it runs: the
// model the agent chose, else the one pi reports.
func (in *instance) applyPin(pin bool) transport.ModelRef {
	m := in.modelRef()
	if m.ID == "" {
		if s := in.worker().Snapshot().Model; s != "" {
			m = parseModel(s)
		}
	}
	in.worker().SetModelPin(m.Provider, m.ID, pin)
	in.mu.Lock()
	in.modelPinned = pin
	in.mu.Unlock()
	in.log.Info().Str("model", m.Provider+"/"+m.ID).Bool("pin", pin).Msg("model pin")
	return m
}

// jsonObject encodes v as a raw JSON command.
func jsonObject(v map[string]any) (json.RawMessage, error) {
	return json.Marshal(v)
}
