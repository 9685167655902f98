package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jpillora/backoff"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// The session registry on the server side: the agents'
// sessions as they report them, the server's own fields on top (bundle,
// gitHead, tasks, the attached instance), baselines, resume, and a mirror
// of the entries of every session a tracked worker writes, kept by
// catch-up after every settle and after every reconnect.

// namingTimeout bounds the wait for pi's answer to set_session_name.
const namingTimeout = 10 * time.Second

// SessionFilter selects sessions in ListSessions; zero fields match all.
type SessionFilter struct {
	Machine string
	Kind    session.Kind
}

// SessionView is one session as the fleet shows it.
type SessionView struct {
	session.Record
	// Registry is the reconciliation state of the machine's projection
	//: anything but synced means the listing may be out of date.
	Registry session.RegistryState
	// StaleBaseline flags a baseline whose repository's HEAD is no longer
	// the GitHead it was primed on, as last checked;
	// CurrentHead is that check's HEAD ("" when never checked).
	StaleBaseline bool
	CurrentHead   string
}

// SessionOrigin says what a worker's session was started from.
type SessionOrigin struct {
	// Source is the path of the session the worker started from; Name its
	// name then (baseline:api, …).
	Source, Name string
	Mode         transport.SessionMode
	// StaleBaseline: the source is a baseline whose repository's HEAD had
	// moved when the worker was spawned.
	StaleBaseline bool
}

// Origin returns what the instance's session was started from; nil for a
// worker started on a new session.
func (i *Instance) Origin() *SessionOrigin {
	i.f.core.mu.RLock()
	defer i.f.core.mu.RUnlock()
	inst := i.f.core.instance(i.id)
	if inst == nil || inst.rec.FromSession == "" {
		return nil
	}
	mode := transport.SessionMode(inst.rec.SessionMode)
	if mode == "" {
		mode = transport.SessionClone
	}
	o := &SessionOrigin{Source: inst.rec.FromSession, Mode: mode, StaleBaseline: inst.rec.StaleBaseline}
	if rec, ok := i.f.sessions.projection(inst.agent).Get(inst.agent, inst.rec.FromSession); ok {
		o.Name = rec.Name
	}
	return o
}

// SessionPath returns the worker's session file on its agent's disk.
func (i *Instance) SessionPath() string {
	i.f.core.mu.RLock()
	defer i.f.core.mu.RUnlock()
	if inst := i.f.core.instance(i.id); inst != nil {
		return inst.rec.SessionPath
	}
	return ""
}

// Transcript returns the last limit entries of the worker's session file,
// oldest first, as the fleet mirrors them (first brought up to date, when
// the agent answers within ctx); more reports older ones. A worker whose
// session file does not exist yet has none.
func (i *Instance) Transcript(ctx context.Context, limit int) (entries []json.RawMessage, more bool, err error) {
	i.f.mu.Lock()
	inst := i.f.core.instance(i.id)
	var agent, path string
	var policyErr error
	if inst != nil {
		agent, path = inst.agent, inst.rec.SessionPath
		// The machine's policy decides even while it is away.
		if a := i.f.agents[agent]; a != nil && a.policy != "" {
			policyErr = trust.Check(a.identity, a.policy, trust.OpView)
		}
	}
	i.f.mu.Unlock()
	if inst == nil {
		return nil, false, fmt.Errorf("%w: %q", ErrUnknownInstance, i.id)
	}
	if policyErr != nil {
		return nil, false, policyErr
	}
	if path == "" {
		return nil, false, nil
	}
	// Best effort: an agent that is away leaves the mirror as it is.
	_ = i.f.CatchUp(ctx, i.id)
	m, err := i.f.mirror(agent, path)
	if err != nil {
		return nil, false, err
	}
	return m.Tail(limit)
}

// ListSessions returns the sessions of the registry that match filter,
// newest first. Baselines are flagged stale from the last HEAD seen for
// their repository (RefreshBaselines checks again).
func (f *Fleet) ListSessions(filter SessionFilter) []SessionView {
	f.core.mu.RLock() // isCloneLocked reads the instances; the session set has its own lock
	defer f.core.mu.RUnlock()
	out := []SessionView{}
	for _, ap := range f.sessions.list(filter.Machine) {
		name, p := ap.agent, ap.p
		state, _ := p.State(name)
		for _, rec := range p.Sessions(name) {
			if rec.Kind == session.KindBaseline && f.isCloneLocked(rec) {
				// A fresh clone carries its baseline's name until the
				// agent reports the task name the server gave it.
				rec.Kind, rec.Pinned = session.KindTask, false
			}
			if filter.Kind != "" && rec.Kind != filter.Kind {
				continue
			}
			v := SessionView{Record: rec, Registry: state}
			if rec.Kind == session.KindBaseline {
				v.CurrentHead = f.sessions.head(name, rec.Cwd)
				v.StaleBaseline = rec.GitHead != "" && v.CurrentHead != "" && v.CurrentHead != rec.GitHead
			}
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out, func(a, b SessionView) int {
		switch {
		case a.UpdatedAt != b.UpdatedAt:
			return int(b.UpdatedAt - a.UpdatedAt)
		case a.Machine != b.Machine:
			return strings.Compare(a.Machine, b.Machine)
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}

// RefreshBaselines asks the agents for the HEAD of every baseline's
// repository (machine only, when not empty), so that ListSessions and
// Status flag the stale ones. Unreachable agents keep their last answer.
func (f *Fleet) RefreshBaselines(ctx context.Context, machine string) {
	type repo struct{ machine, cwd string }
	var repos []repo
	seen := map[repo]bool{}
	for _, v := range f.ListSessions(SessionFilter{Machine: machine, Kind: session.KindBaseline}) {
		r := repo{v.Machine, v.Cwd}
		if v.GitHead != "" && !seen[r] {
			seen[r] = true
			repos = append(repos, r)
		}
	}
	for _, r := range repos {
		if _, err := f.RepoHead(ctx, r.machine, r.cwd); err != nil {
			f.log.Debug().Err(err).Str("agent", r.machine).Str("cwd", r.cwd).Msg("baseline HEAD not checked")
		}
	}
}

func headKey(machine, cwd string) string { return machine + "\x00" + cwd }

// RepoHead asks agent machine for the commit HEAD points to in cwd (a
// pifleet agent: ErrNotSupported otherwise) and remembers it for the
// staleness flags of the baselines of that repository.
func (f *Fleet) RepoHead(ctx context.Context, machine, cwd string) (string, error) {
	f.mu.lockAgents()
	a, c, err := f.connForLocked(machine, trust.OpView)
	if err == nil && !a.pifleet {
		err = fmt.Errorf("%w: %s (repo_head)", ErrNotSupported, machine)
	}
	f.mu.Unlock()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, f.requestTimeout())
	defer cancel()
	ans, err := c.Request(ctx, &transport.RepoHeadFrame{Cwd: cwd})
	if err != nil {
		return "", err
	}
	r, ok := ans.(*transport.RepoHeadResultFrame)
	switch {
	case !ok:
		return "", wrongAnswer("repo_head", (*transport.RepoHeadResultFrame)(nil), ans)
	case r.Error != nil:
		return "", &FileError{Op: "repo_head", Code: r.Error.Code, Message: r.Error.Message}
	}
	f.sessions.setHead(machine, cwd, r.Head)
	return r.Head, nil
}

// ResolveSession finds a session of the registry by reference: its path,
// its session id, or its name (baseline:api, task:t42:fix-tests; the newest
// of that name). machine narrows the search; empty searches every agent.
// A baseline name never resolves to a task clone of it (a clone carries
// its source's name until the server renames it).
func (f *Fleet) ResolveSession(machine, ref string) (session.Record, error) {
	f.core.mu.RLock()
	defer f.core.mu.RUnlock()
	return f.resolveSessionLocked(machine, ref)
}

func (f *Fleet) resolveSessionLocked(machine, ref string) (session.Record, error) {
	var byPath, byID, byName []session.Record
	for _, ap := range f.sessions.list(machine) {
		for _, rec := range ap.p.Sessions(ap.agent) { // newest first
			switch {
			case rec.Path == ref:
				byPath = append(byPath, rec)
			case rec.SessionID == ref:
				byID = append(byID, rec)
			case rec.Name == ref && !(rec.Kind == session.KindBaseline && f.isCloneLocked(rec)):
				byName = append(byName, rec)
			}
		}
	}
	if len(byPath) > 1 {
		machines := make([]string, len(byPath))
		for i, r := range byPath {
			machines[i] = r.Machine
		}
		slices.Sort(machines)
		return session.Record{}, &ConfigError{Field: "machine",
			Reason: fmt.Sprintf("session %s exists on %s: name the machine", ref, strings.Join(machines, ", "))}
	}
	for _, l := range [][]session.Record{byPath, byID, byName} {
		if len(l) > 0 {
			slices.SortStableFunc(l, func(a, b session.Record) int { return int(b.UpdatedAt - a.UpdatedAt) })
			return l[0], nil
		}
	}
	return session.Record{}, &UnknownSessionError{Ref: ref, Machine: machine}
}

// isCloneLocked: the session is a worker's clone (it has tasks, or a
// tracked instance that started from another session writes it). f.mu
// or the core's lock must be held.
func (f *Fleet) isCloneLocked(rec session.Record) bool {
	if len(rec.TaskIDs) > 0 {
		return true
	}
	if inst := f.core.instance(rec.AttachedInstanceID); inst != nil {
		return inst.rec.FromSession != "" && inst.rec.FromSession != rec.Path
	}
	return false
}

// resolveOrigin checks a spawn's fromSession before any frame is sent and
// fills in what the spawn left empty (machine, cwd, bundle) from the
// session's record.
func (f *Fleet) resolveOrigin(ctx context.Context, machine, cwd, bundleName *string, opts *SpawnOptions) (*serverstore.Instance, error) {
	mode := opts.SessionMode
	if mode == "" {
		mode = transport.SessionClone
	}
	if mode != transport.SessionClone && mode != transport.SessionAttach {
		return nil, &ConfigError{Field: "SessionMode", Reason: fmt.Sprintf("%q is neither clone nor attach", mode)}
	}
	f.mu.Lock()
	src, err := f.resolveSessionLocked(*machine, opts.FromSession)
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	if mode == transport.SessionAttach {
		if src.Info().Pinned {
			f.mu.Unlock()
			return nil, fmt.Errorf("%w: %s (%s) is a pinned session; resume it as a clone", ErrSessionPinned, src.Path, src.Name)
		}
		if inst := f.core.instance(src.AttachedInstanceID); inst != nil && !InstanceTable.IsFinal(inst.m.State()) {
			f.mu.Unlock()
			return nil, fmt.Errorf("%w: %s is attached to instance %s", ErrSessionBusy, src.Path, inst.id)
		}
	}
	f.mu.Unlock()
	if *machine == "" {
		*machine = src.Machine
	}
	if *cwd == "" {
		*cwd = src.Cwd
	}
	if *bundleName == "" {
		*bundleName = src.Bundle
	}
	if *bundleName == "" {
		return nil, &ConfigError{Field: "bundle", Reason: "session " + src.Path + " records no bundle: name one"}
	}
	origin := &serverstore.Instance{FromSession: src.Path, SessionMode: string(mode)}
	if src.Kind == session.KindBaseline && src.GitHead != "" {
		head, err := f.RepoHead(ctx, src.Machine, src.Cwd)
		if err != nil {
			f.log.Warn().Err(err).Str("session", src.Path).Msg("baseline HEAD not checked")
		} else if head != src.GitHead {
			origin.StaleBaseline = true
			f.log.Warn().Str("session", src.Path).Str("baselineHead", src.GitHead).Str("head", head).
				Msg("baseline is stale: its repository moved on")
		}
	}
	return origin, nil
}

// annotateSpawnedLocked records the server's fields of a new worker's
// session: the bundle, the attached instance, and for a clone its task
// name. It returns the rename to send, if any.
func (f *Fleet) annotateSpawnedLocked(inst *instance) {
	if inst.rec.SessionPath == "" {
		return
	}
	p := f.sessions.projection(inst.agent)
	p.Annotate(inst.agent, inst.rec.SessionPath, func(sf *session.ServerFields) {
		sf.Bundle, sf.BundleHash, sf.AttachedInstanceID = inst.rec.Bundle, inst.rec.BundleHash, inst.id
	})
	f.sessions.persist(inst.agent)
}

// detachSessionLocked: an ended instance no longer writes its session.
func (f *Fleet) detachSessionLocked(inst *instance) {
	if inst.rec.SessionPath == "" || inst.id == "" {
		return
	}
	if _, known := f.sessions.projection(inst.agent).Get(inst.agent, inst.rec.SessionPath); !known {
		return
	}
	f.sessions.projection(inst.agent).Annotate(inst.agent, inst.rec.SessionPath, func(sf *session.ServerFields) {
		if sf.AttachedInstanceID == inst.id {
			sf.AttachedInstanceID = ""
		}
	})
	f.sessions.persist(inst.agent)
}

// nameClone gives a fresh clone its task name at once: it carries its
// source's name (baseline:…) until renamed. The task id is reserved for
// the instance's first task; the slug is "untitled" until that task's
// prompt names it.
func (f *Fleet) nameClone(ctx context.Context, i *Instance) error {
	f.mu.Lock()
	inst := f.core.instance(i.id)
	if inst == nil || inst.rec.FromSession == "" || inst.rec.SessionMode == string(transport.SessionAttach) {
		f.mu.Unlock()
		return nil
	}
	id := f.newTaskID()
	name, err := session.TaskName(id, "")
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if err := f.setSessionName(ctx, i.id, name); err != nil {
		return err
	}
	f.mu.Lock()
	inst.rec.ReservedTaskID, inst.rec.SessionName = id, name
	f.persistInstanceLocked(inst)
	f.mu.Unlock()
	return f.durable(inst)
}

// setSessionName names the worker's session (pi's set_session_name, which
// pi answers at once: a worker that does not within namingTimeout is not
// waited for longer).
func (f *Fleet) setSessionName(ctx context.Context, id, name string) error {
	_, err := f.rpcWithin(ctx, id, map[string]any{"type": "set_session_name", "name": name}, trust.OpSteer,
		min(f.requestTimeout(), namingTimeout))
	if err != nil {
		return fmt.Errorf("fleet: naming the session of %s %q: %w", id, name, err)
	}
	return nil
}

// taskIDFor returns the id of a new task on inst: the one reserved by its
// clone's name, once.
func (f *Fleet) taskIDFor(inst *instance) string {
	if id := inst.rec.ReservedTaskID; id != "" {
		inst.rec.ReservedTaskID = ""
		return id
	}
	return f.newTaskID()
}

// nameForTask gives a clone its task's name, task:<taskId>:<slug>, in
// place of the untitled one it got at spawn (a worker on a session of its
// own keeps the name it has, or none), and records the task on the
// session.
func (f *Fleet) nameForTask(ctx context.Context, instanceID, taskID, prompt string) {
	f.mu.Lock()
	inst := f.core.instance(instanceID)
	if inst == nil {
		f.mu.Unlock()
		return
	}
	untitled, _ := session.TaskName(taskID, "")
	rename := inst.rec.SessionName == untitled
	path, agent := inst.rec.SessionPath, inst.agent
	f.mu.Unlock()
	if rename {
		name, err := session.TaskName(taskID, prompt)
		if err == nil {
			err = f.setSessionName(ctx, instanceID, name)
		}
		if err != nil {
			f.log.Warn().Err(err).Str("instance", instanceID).Msg("task session not named")
		} else {
			f.mu.Lock()
			inst.rec.SessionName = name
			f.persistInstanceLocked(inst)
			f.mu.Unlock()
		}
	}
	if path == "" {
		return
	}
	f.sessions.projection(agent).Annotate(agent, path, func(sf *session.ServerFields) {
		if !slices.Contains(sf.TaskIDs, taskID) {
			sf.TaskIDs = append(sf.TaskIDs, taskID)
		}
	})
	f.sessions.persist(agent)
}

// awaitSession waits (at most the request timeout) until the registry
// holds the session at path on machine and ok accepts its record.
func (f *Fleet) awaitSession(ctx context.Context, machine, path string, ok func(session.Record) bool) (session.Record, error) {
	sub := f.Subscribe(16)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(ctx, f.requestTimeout())
	defer cancel()
	for {
		rec, found := f.sessions.projection(machine).Get(machine, path)
		if found && ok(rec) {
			return rec, nil
		}
		select {
		case <-sub.C:
		case <-ctx.Done():
			return session.Record{}, fmt.Errorf("fleet: session %s on %s: %w", path, machine, ctx.Err())
		}
	}
}

// ---- resume ----

// ResumeOptions tune Resume.
type ResumeOptions struct {
	// Mode is clone (the default: the worker continues in a new file whose
	// parentSession is the session) or attach (it appends to the session
	// itself; refused for a pinned session with ErrSessionPinned).
	Mode transport.SessionMode
	// Spawn is passed to Spawn: its Agent narrows the lookup of the
	// session, its Bundle overrides the session's recorded bundle; the
	// worker's cwd is always the session's.
	Spawn SpawnOptions
}

// Resume starts a worker on a session of the registry (a path, a session
// id or a name) on the machine and in the directory where it lives.
func (f *Fleet) Resume(ctx context.Context, ref string, opts ResumeOptions) (*Instance, error) {
	so := opts.Spawn
	so.FromSession, so.SessionMode, so.Cwd = ref, opts.Mode, ""
	return f.Spawn(ctx, so)
}

// ---- entry mirrors and catch-up (seed §9 catch_up, AC-3.5.7) ----

// scheduleCatchUp mirrors, in the background and after delay, the
// entries the sessions of the instances ids gained since their last
// catch-up.
func (f *Fleet) scheduleCatchUp(agent string, delay time.Duration, ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scheduleCatchUpLocked(agent, delay, ids...)
}

// scheduleCatchUpLocked starts a catch-up of each instance that has none
// pending; one pending already is asked to run once more after it is done
// (a settle during a catch-up may have written after its read). Settles
// that come faster than catch-ups so cost one more catch-up, not one each.
func (f *Fleet) scheduleCatchUpLocked(agent string, delay time.Duration, ids ...string) {
	if f.state != lifeStarted {
		return
	}
	for _, id := range ids {
		if _, pending := f.core.catchUp(id); pending {
			f.core.setCatchUp(id, true)
			continue
		}
		f.core.setCatchUp(id, false)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			retry := catchUpBackoff()
			wait := delay
			for {
				if !f.pause(wait) {
					break
				}
				f.mu.Lock()
				f.core.setCatchUp(id, false) // a settle from now on asks for another run
				f.mu.Unlock()
				err := f.CatchUp(f.ctx, id)
				if err != nil {
					f.log.Debug().Err(err).Str("agent", agent).Str("instance", id).Msg("session catch-up")
				}
				f.mu.Lock()
				again, _ := f.core.catchUp(id)
				again = again && f.state == lifeStarted
				f.mu.Unlock()
				wait = 0
				if !again {
					wait, again = retryCatchUp(retry, err)
				}
				if !again {
					break
				}
			}
			f.mu.Lock()
			f.core.endCatchUp(id)
			f.mu.Unlock()
		}()
	}
}

// catchUpRetries bounds the retries of a catch-up the agent failed.
const catchUpRetries = 6

// catchUpBackoff spaces those retries: 0.5 s, 1 s, 2 s, … at most 30 s.
func catchUpBackoff() *backoff.Backoff {
	return &backoff.Backoff{Min: 500 * time.Millisecond, Max: 30 * time.Second, Factor: 2, Jitter: true}
}

// retryCatchUp says whether, and after how long, a catch-up that ended
// with err is tried again: an agent that is there but failed this time is
// asked again, further apart each time, a bounded number of times (the
// next full report starts over).
func retryCatchUp(retry *backoff.Backoff, err error) (time.Duration, bool) {
	if !transientCatchUpError(err) || retry.Attempt() >= catchUpRetries {
		return 0, false
	}
	return retry.Duration(), true
}

// transientCatchUpError: the agent answered the catch-up with an error
// (or not within the request timeout) that another try may not meet. An
// agent that is away, does not speak pifleet or whose registry is not
// synced is caught up after its next full report instead.
func transientCatchUpError(err error) bool {
	var fe *FileError
	return errors.As(err, &fe) || errors.Is(err, context.DeadlineExceeded)
}

// pause waits d (none when d <= 0); false when the fleet closed meanwhile.
func (f *Fleet) pause(d time.Duration) bool {
	if d <= 0 {
		return f.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// catchUpAgentLocked schedules a catch-up of every session of agent's
// instances that may have grown: live ones, and ended ones not yet
// mirrored to their end.
func (f *Fleet) catchUpAgentLocked(agent string) func() {
	var ids []string
	for inst := range f.core.agentInstances(agent) {
		if inst.id != "" && inst.rec.SessionPath != "" && !inst.rec.MirrorDone {
			ids = append(ids, inst.id)
		}
	}
	slices.Sort(ids)
	return func() { f.scheduleCatchUp(agent, 0, ids...) }
}

// CatchUp fetches the entries the instance's session file gained after
// the last one mirrored (session_entries), appends them to the mirror,
// and moves the registry through catch_up and back to synced. The agent's
// projection must be synced (else it returns the *fsmkit.StaleEventError:
// the catch-up runs again after the next full report). Catch-ups of one
// agent run one at a time. The mirror of an ended instance is done once
// caught up after its end, or once its agent no longer knows it (it
// restarted: nothing more can come); it is not fetched again.
func (f *Fleet) CatchUp(ctx context.Context, instanceID string) error {
	f.mu.Lock()
	inst := f.core.instance(instanceID)
	if inst == nil {
		f.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownInstance, instanceID)
	}
	a, c, err := f.connForLocked(inst.agent, trust.OpView)
	if err == nil && !a.pifleet {
		err = fmt.Errorf("%w: %s (session_entries)", ErrNotSupported, inst.agent)
	}
	path, ended := inst.rec.SessionPath, InstanceTable.IsFinal(inst.m.State())
	done := ended && inst.rec.MirrorDone
	p := f.sessions.projection(inst.agent)
	f.mu.Unlock()
	if path == "" || done {
		return nil // no session, or mirrored to its end already
	}
	if err != nil {
		return err
	}
	a.catchUp.Lock()
	defer a.catchUp.Unlock()
	if err := p.BeginCatchUp(inst.agent); err != nil {
		return err
	}
	n, err := f.fetchEntries(ctx, c, inst.agent, instanceID, path)
	var fe *FileError
	if ended && errors.As(err, &fe) && fe.Code == "unknown_instance" {
		// The agent no longer knows the ended worker (it restarted):
		// nothing more can come. The mirror is done with what it has.
		f.log.Info().Str("agent", inst.agent).Str("instance", instanceID).Str("session", path).
			Msg("session mirror ended: the agent no longer knows the instance")
		err = nil
	}
	if err == nil && ended {
		// Nothing more will come: make the mirror durable.
		if m, merr := f.mirror(inst.agent, path); merr == nil {
			err = m.Sync()
		}
	}
	if cerr := p.CaughtUp(inst.agent, path, f.lastMirrored(inst.agent, path)); cerr != nil && err == nil {
		err = cerr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && ended && !inst.rec.MirrorDone {
		inst.rec.MirrorDone = true
		f.persistInstanceLocked(inst)
	}
	// Told even when nothing new came: the registry is back to synced.
	// The projection's LastEntryID is not persisted here: the mirror is the
	// catch-up's cursor and outlives a restart by itself.
	f.publishLocked(Change{Kind: ChangeSessionEntries, Agent: inst.agent, InstanceID: instanceID,
		Message: fmt.Sprintf("%d entries mirrored", n)})
	return err
}

func (f *Fleet) lastMirrored(machine, path string) string {
	m, err := f.mirror(machine, path)
	if err != nil {
		return ""
	}
	return m.LastEntryID()
}

// fetchEntries pages session_entries into the mirror until the agent has
// no more. A file whose cursor entry is gone (replaced) is mirrored again
// from its start, once.
func (f *Fleet) fetchEntries(ctx context.Context, c *transport.Conn, machine, instanceID, path string) (int, error) {
	m, err := f.mirror(machine, path)
	if err != nil {
		return 0, err
	}
	total, reset := 0, false
	for {
		rctx, cancel := context.WithTimeout(ctx, f.requestTimeout())
		ans, err := c.Request(rctx, &transport.SessionEntriesFrame{InstanceID: instanceID, After: m.LastEntryID()})
		cancel()
		if err != nil {
			return total, err
		}
		r, ok := ans.(*transport.SessionEntriesResultFrame)
		if !ok {
			return total, wrongAnswer("session_entries", (*transport.SessionEntriesResultFrame)(nil), ans)
		}
		if r.Error != nil {
			switch {
			case r.Error.Code == "not_found":
				return total, nil // pi writes the file with the first answer
			case r.Error.Code == "unknown_entry" && !reset:
				reset = true
				if err := m.Reset(); err != nil {
					return total, err
				}
				continue
			}
			return total, &FileError{Op: "session_entries", Code: r.Error.Code, Message: r.Error.Message}
		}
		var entries []json.RawMessage
		if err := json.Unmarshal(r.Entries, &entries); err != nil {
			return total, fmt.Errorf("fleet: session_entries: %w", err)
		}
		if err := m.Append(entries); err != nil {
			return total, err
		}
		total += len(entries)
		if !r.More || len(entries) == 0 {
			return total, nil
		}
	}
}
