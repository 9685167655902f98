package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"example.com/pifleet/fleet/agent/internal/agentstore"
	"example.com/pifleet/fleet/agent/internal/fsservice"
	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"github.com/rs/zerolog"
)

// savedSpec is the part of a worker's spec a restarted agent needs to keep
// supervising it (and to restart it for a rebundle). It sits in the state
// file (mode 0600). Env holds only what the worker's environment adds to
// the agent's own (the spawn's env values and the PI_FLEET_* variables):
// the agent's environment, with its provider keys, is never written, and
// a restarted agent lays the saved entries over its own again.
type savedSpec struct {
	Command    []string       `json:"command"`
	Env        []string       `json:"env,omitempty"`
	Budget     worker.Budget  `json:"budget"`
	AutoAnswer map[string]any `json:"autoAnswer,omitempty"`
	Tools      []string       `json:"tools,omitempty"`
}

const specKeyPrefix = "spec/"

func (a *Agent) saveSpec(id string, spec worker.Spec, tools []string) error {
	b, err := json.Marshal(savedSpec{Command: spec.Command, Env: envOverlay(a.cfg.Env, spec.Env), Budget: spec.Budget, AutoAnswer: spec.AutoAnswer, Tools: tools})
	if err == nil {
		err = a.store.PutKV(specKeyPrefix+id, b)
	}
	if err != nil {
		a.log.Error().Err(err).Str("instanceId", id).Msg("cannot persist the worker's spec")
	}
	return err
}

// onLaunch is every worker spec's OnLaunch: the handle of a shim about to
// start is on disk before the shim is, so that an agent killed at any
// point of a start (or a restart) leaves a worker its successor can find,
// and adopt or stop.
func (a *Agent) onLaunch(id string) func(worker.Persisted) error {
	return func(p worker.Persisted) error {
		if err := a.handles.put(id, func() worker.Persisted { return p }); err != nil {
			return fmt.Errorf("cannot store the worker's handle: %w", err)
		}
		return nil
	}
}

// envOverlay returns the entries of env that base does not hold as they
// are: what a worker's environment adds to the agent's.
func envOverlay(base, env []string) []string {
	in := make(map[string]bool, len(base))
	for _, kv := range base {
		in[kv] = true
	}
	var out []string
	for _, kv := range env {
		if !in[kv] {
			out = append(out, kv)
		}
	}
	return out
}

// overlayEnv lays overlay over base: each of its entries replaces base's
// entry of the same name (the inverse of envOverlay for the environments
// the agent builds, which only add and replace).
func overlayEnv(base, overlay []string) []string {
	env := slices.Clone(base)
	for _, kv := range overlay {
		name, _, _ := strings.Cut(kv, "=")
		env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		env = append(env, kv)
	}
	return env
}

func (a *Agent) forget(id string) {
	a.forgetRecord(id)
	_ = a.handles.remove(id)
}

// forgetRecord forgets the instance id but keeps its worker's handle: the
// worker may still be running (it could not be stopped), and the handle
// is the only way to it. Its next start finds the handle named by no
// record and tries again (discardStrayHandles).
func (a *Agent) forgetRecord(id string) {
	for _, k := range []string{specKeyPrefix + id, workerKeyPrefix + id} {
		_ = a.store.DeleteKV(k)
	}
	_ = a.store.DeleteInstance(id)
}

// readopt takes over the workers of the agent's previous life (AC-3.13,
// DESIGN decision 6): each one still running under its shim is adopted
// with the same instance id and its event stream resumes where the dead
// agent left it (a run in flight settles exactly once); one that cannot
// be adopted is reported lost, with its session path (resumable), and its
// open task ends with an aborted task_done. No pid is ever signalled: the
// shim owns the process group.
func (a *Agent) readopt(ctx context.Context) error {
	recs, err := a.store.Instances()
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(recs))
	for _, rec := range recs {
		known[rec.InstanceID] = true
		switch {
		case rec.Spawning:
			a.rollBackSpawn(ctx, rec)
			continue
		case rec.State != transport.InstanceRunning:
			a.forgetEnded(rec) // ended in a previous life
			continue
		}
		if in := a.adopt(ctx, rec); in != nil {
			continue
		}
		gone := a.discard(ctx, rec.InstanceID, "it cannot be re-adopted")
		a.reportLost(rec, gone)
	}
	a.discardStrayHandles(ctx, known)
	return nil
}

// rollBackSpawn undoes a spawn the previous agent did not finish: nobody
// was told of its instance, so its worker (if it got as far as starting)
// is stopped and the instance forgotten. The spawn's requester saw its
// connection drop and spawns again if it still wants a worker. A worker
// that cannot be stopped keeps its handle (forgetRecord).
func (a *Agent) rollBackSpawn(ctx context.Context, rec agentstore.Instance) {
	a.log.Warn().Str("instanceId", rec.InstanceID).Msg("a spawn was cut short by the agent's end; rolling it back")
	if a.discard(ctx, rec.InstanceID, "its spawn did not complete") {
		a.forget(rec.InstanceID)
		return
	}
	a.forgetRecord(rec.InstanceID)
}

// discard stops the worker whose handle is stored under id, if its shim
// is still there (see worker.Discard); why says why, for the log. It
// reports whether the worker is known to be gone: stopped now, no shim
// serving its handle, or no handle to reach it by. Any other failure
// leaves a worker that may still run: it is logged, and the caller keeps
// the handle.
func (a *Agent) discard(ctx context.Context, id, why string) (gone bool) {
	p, ok := a.persistedWorker(id)
	if !ok {
		return true
	}
	log := a.log.With().Str("instanceId", id).Logger()
	err := worker.Discard(ctx, p, a.cfg.StopGrace, log)
	switch {
	case err == nil:
		log.Warn().Str("why", why).Msg("worker stopped: nobody would ever control it")
	case errors.Is(err, worker.ErrGone):
	default:
		log.Error().Err(err).Str("why", why).Msg("cannot stop a worker nobody controls; its handle is kept for the next start to try again")
		return false
	}
	return true
}

// discardStrayHandles stops the workers of handle files that no instance
// record names (a record lost or removed before its handle), and removes
// the files.
func (a *Agent) discardStrayHandles(ctx context.Context, known map[string]bool) {
	for _, id := range a.handles.ids() {
		if known[id] {
			continue
		}
		if a.discard(ctx, id, "no instance record names it") {
			_ = a.handles.remove(id)
		}
	}
}

// adopt re-attaches to one worker; nil when it cannot be done.
func (a *Agent) adopt(ctx context.Context, rec agentstore.Instance) *instance {
	id := rec.InstanceID
	log := a.log.With().Str("instanceId", id).Logger()
	p, ok := a.persistedWorker(id)
	if !ok {
		log.Warn().Msg("no worker handle stored; reporting it lost")
		return nil
	}
	var ss savedSpec
	if v, ok, err := a.store.GetKV(specKeyPrefix + id); err != nil || !ok || json.Unmarshal(v, &ss) != nil {
		log.Warn().Msg("no worker spec stored; reporting it lost")
		return nil
	}
	spec := worker.Spec{InstanceID: id, Cwd: rec.Cwd, Command: ss.Command, Env: overlayEnv(a.cfg.Env, ss.Env),
		StateDir: filepath.Join(a.cfg.StateDir, "workers"), ShimCommand: a.cfg.ShimCommand,
		RingSize: a.cfg.EventRing, StopGrace: a.cfg.StopGrace, Budget: ss.Budget,
		DialogTimeout: a.cfg.DialogTimeout, AutoAnswer: ss.AutoAnswer, Log: log, OnLaunch: a.onLaunch(id)}
	if rec.TaskID != "" {
		// The task was recorded before its command reached the worker, so
		// a run may have started, or even ended, unseen by the dead agent
		// (an event taken from the shim is gone from it). Adopting with
		// the run open makes the worker settle it exactly once: at its
		// real end, or at once when pi is found idle.
		p.RunOpen = true
	}
	var resend string // a revision prompt the dead agent did not send
	if rec.TaskID != "" && rec.Revision != "" && !a.revisionInSession(rec, p, log) {
		// Its run has not started: none is open, and the task's next
		// settle answers the prompt sent once the worker is attached.
		p.RunOpen, resend = false, rec.Revision
	}
	w, err := worker.Adopt(ctx, spec, p)
	if err != nil {
		if errors.Is(err, worker.ErrGone) {
			log.Warn().Err(err).Msg("worker gone")
		} else {
			log.Error().Err(err).Msg("cannot re-adopt the worker")
		}
		return nil
	}
	in := &instance{a: a, id: id, cwd: rec.Cwd, log: log,
		fs:   fsservice.New(rec.Cwd, fsservice.WithAccess(a.cfg.FsAccess), fsservice.WithLogger(a.cfg.Logger)),
		spec: spec, bundle: rec.Bundle, bundleHash: rec.BundleHash, tools: ss.Tools, traceID: rec.TraceID, spawnID: rec.SpawnID,
		state: transport.InstanceRunning, sessionPath: rec.SessionPath, rejection: rec.Rejection}
	if rec.Model != nil {
		in.model = &transport.ModelRef{Provider: rec.Model.Provider, ID: rec.Model.ID, Thinking: rec.Model.Thinking}
	}
	if rec.TaskID != "" {
		traceID := rec.TraceID
		in.task = &openTask{id: rec.TaskID, owner: rec.TaskOwner, traceID: traceID}
	}
	a.mu.Lock()
	a.instances[id] = in
	a.order = append(a.order, id)
	a.mu.Unlock()
	in.attach(w)
	if rec.ModelPinned {
		in.applyPin(true)
	}
	if resend != "" {
		a.sendRevision(in, rec.Rejection, resend)
	}
	log.Info().Str("taskId", rec.TaskID).Msg("worker re-adopted")
	return in
}

// reportLost lists a worker that could not be adopted as lost and ends its
// open task. A worker not known to be gone keeps its handle
// (forgetRecord).
func (a *Agent) reportLost(rec agentstore.Instance, gone bool) {
	path := rec.SessionPath
	if p, ok := a.persistedWorker(rec.InstanceID); ok && path == "" {
		path = p.SessionPath
	}
	in := &instance{a: a, id: rec.InstanceID, cwd: rec.Cwd, bundle: rec.Bundle, bundleHash: rec.BundleHash,
		state: transport.InstanceLost, sessionPath: path, exitTask: rec.TaskID,
		fs: fsservice.New(rec.Cwd, fsservice.WithAccess(a.cfg.FsAccess), fsservice.WithLogger(a.cfg.Logger))}
	a.mu.Lock()
	a.lost = append(a.lost, in)
	a.mu.Unlock()
	if rec.TaskID != "" {
		f := &transport.TaskDoneFrame{TaskID: rec.TaskID, InstanceID: rec.InstanceID, Status: transport.TaskAborted,
			Summary: "(agent restarted; worker lost mid-task)"}
		f.TraceID = rec.TraceID
		if !a.finishTask(f, rec.TaskOwner) {
			// Kept, so that should this life end before the report is
			// stored, the next one reports the task again.
			return
		}
	}
	if !gone {
		a.forgetRecord(rec.InstanceID)
		return
	}
	a.forget(rec.InstanceID)
}

// forgetEnded forgets an instance that ended in a previous life. Its task,
// if the record still names one, never had its report stored (storing it
// closes the task in the same transaction): it is reported aborted now.
func (a *Agent) forgetEnded(rec agentstore.Instance) {
	if rec.TaskID != "" {
		f := &transport.TaskDoneFrame{TaskID: rec.TaskID, InstanceID: rec.InstanceID, Status: transport.TaskAborted,
			Summary: "(agent restarted; the worker had ended before its task's report was stored)"}
		f.TraceID = rec.TraceID
		if !a.finishTask(f, rec.TaskOwner) {
			return // as in reportLost
		}
	}
	a.forget(rec.InstanceID)
}

// revisionInSession reports whether the revision prompt rec.Revision,
// stored before the dead agent handed it to the worker's shim, reached the
// worker all the same: the agent may have died after the shim took it and
// before it noted so. The worker's session says (revisionArrived); one
// that cannot be read says no, and the prompt is sent: a feedback never
// delivered would go unseen, one delivered twice does not.
func (a *Agent) revisionInSession(rec agentstore.Instance, p worker.Persisted, log zerolog.Logger) bool {
	path := rec.SessionPath
	if path == "" {
		path = p.SessionPath
	}
	if path == "" {
		return false
	}
	f, err := session.Read(path)
	if err != nil {
		log.Warn().Err(err).Msg("cannot read the worker's session to learn whether its revision prompt arrived; sending it")
		return false
	}
	return revisionArrived(f.Entries, rec.Revision)
}

// revisionArrived reports whether a session's last user message is the
// revision prompt message: pi records a prompt as a user message when it
// takes it, and the worker answered nothing newer than the revision's
// task (the task is still open).
func revisionArrived(entries []session.Entry, message string) bool {
	for _, e := range slices.Backward(entries) {
		if e.Type != session.TypeMessage || e.Role != "user" {
			continue
		}
		return userText(e.Message) == message
	}
	return false
}

// userText is the text of a user message: its content, a string or text
// parts.
func userText(raw json.RawMessage) string {
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct{ Type, Text string }
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, part := range parts {
		if part.Type == "text" {
			b.WriteString(part.Text)
		}
	}
	return b.String()
}

// sendRevision sends a revision prompt that a dead agent had stored but
// not sent, completing the rejection it carries out.
func (a *Agent) sendRevision(in *instance, rejectionID, message string) {
	cmd, err := jsonObject(revisionCommand(message))
	if err == nil {
		err = in.worker().Send(cmd)
	}
	if err != nil {
		in.log.Error().Err(err).Str("rejectionId", rejectionID).Msg("cannot send the revision prompt a restart found unsent")
		return
	}
	in.log.Warn().Str("rejectionId", rejectionID).Msg("revision prompt sent: the previous agent ended before it did")
	a.revisionHandedOver(in, message)
}
