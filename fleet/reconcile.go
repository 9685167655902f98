package fleet

import (
	"context"
	"fmt"

	"example.com/pifleet/fleet/internal/serverstore"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// reconcile runs once per established connection (seed §6, AC-3.8): list
// the agent's instances, catch up on each live worker's missed events
// (events_since, pifleet agents), take a get_state snapshot, and fire
// the outcome on every instance of the agent.
//
// known are the agent's instances when the connection was established:
// one spawned later is not in the list's answer and is not lost. An
// agent that lists spawn ids is listed even when none is known: a worker
// of a spawn whose answer the server never stored is adopted or stopped
// (reconcileSpawnsLocked).
//
// A snapshot is applied only to the state it was asked for: frames of the
// same connection (a task_done, a verdict and its stop) may move the
// instance while get_state is out, and the command a state re-sends was
// then already sent on this connection.
func (f *Fleet) reconcile(a *agentState, c *transport.Conn, known []*instance) {
	ctx, cancel := context.WithTimeout(f.ctx, f.requestTimeout())
	defer cancel()
	cancelOnClose(ctx, cancel, c)
	f.mu.Lock()
	spawnIDs := a.announces(transport.CapabilitySpawnID)
	f.mu.Unlock()
	if len(known) == 0 && !spawnIDs {
		return
	}
	ans, err := c.Request(ctx, &transport.ListFrame{})
	if err != nil {
		f.log.Warn().Err(err).Str("agent", a.name).Msg("reconcile: list failed")
		return
	}
	list, ok := ans.(*transport.InstancesFrame)
	if !ok {
		f.log.Warn().Str("agent", a.name).Str("type", ans.FrameType()).Msg("reconcile: list answered with another frame")
		return
	}
	listed := make(map[string]transport.InstanceInfo, len(list.Instances))
	for _, in := range list.Instances {
		listed[in.InstanceID] = in
	}

	f.mu.Lock()
	var live []*instance
	for _, inst := range known {
		if InstanceTable.IsFinal(inst.m.State()) {
			continue
		}
		info, ok := listed[inst.id]
		if ok && info.State == transport.InstanceRunning {
			inst.rec.ModelPinned = info.ModelPinned
			live = append(live, inst)
			continue
		}
		gone := coreInput{Kind: inWorkerGone, Reason: "not listed by the agent after a reconnect"}
		if ok {
			gone.Reason, gone.SessionPath = "agent reports it "+string(info.State), info.SessionPath
			gone.Stopped = info.State == transport.InstanceStopped
		}
		f.stepInstanceLocked(inst, gone)
	}
	spawns := f.reconcileSpawnsLocked(a, c, list.Instances)
	live = append(live, spawns.adopted...)
	var adoptedWrites []*serverstore.Pending
	for _, inst := range spawns.adopted {
		adoptedWrites = append(adoptedWrites, inst.written)
	}
	pifleet := a.pifleet
	f.mu.Unlock()
	f.settleSpawns(ctx, a, c, spawns, adoptedWrites)

	for _, inst := range live {
		f.mu.Lock()
		since := inst.rec.LastSeenEventSeq
		f.mu.Unlock()
		// A pifleet agent numbers every event, so since 0 means none was
		// seen: the whole ring is missed.
		incomplete := true // what no replay covers proves nothing
		if pifleet {
			ans, err := c.Request(ctx, &transport.EventsSinceFrame{InstanceID: inst.id, Since: float64(since)})
			if err != nil {
				f.log.Warn().Err(err).Str("instance", inst.id).Msg("reconcile: events replay failed")
			} else if r, ok := ans.(*transport.EventsReplayedFrame); ok {
				// The ring's dropped events are since+1 .. since+Missed:
				// the replay covers the open task's run when all of them
				// came before its prompt was sent.
				f.mu.Lock()
				var promptSeq uint64
				if t := f.core.task(inst.openTask); t != nil {
					promptSeq = t.rec.PromptEventSeq
				}
				incomplete = r.Missed > 0 && since+uint64(r.Missed) > promptSeq
				f.mu.Unlock()
			}
		}
		f.mu.Lock()
		inst.replayIncomplete = incomplete
		f.mu.Unlock()
		f.mu.Lock()
		asked := inst.m.State()
		f.mu.Unlock()
		_, err := f.rpc(ctx, inst.id, map[string]any{"type": "get_state"}, trust.OpView)
		f.mu.Lock()
		now := inst.m.State()
		if now != asked || InstanceTable.IsFinal(now) {
			// The connection is up, so the application and the agent's
			// frames (a task_done, an accept with stop and its stopped
			// answer) move the instance while get_state is out. The
			// snapshot describes the state it was asked for; applied to
			// the new one it would send the new state's command a second
			// time (a stop already sent on this connection) or confirm
			// what it does not show.
			f.mu.Unlock()
			f.log.Debug().AnErr("getStateErr", err).Str("instance", inst.id).Str("asked", string(asked)).Str("now", string(now)).
				Msg("reconcile: the instance moved on during get_state; snapshot not applied")
			continue
		}
		if err != nil {
			f.mu.Unlock()
			f.log.Warn().Err(err).Str("instance", inst.id).Msg("reconcile: get_state failed; left as it is")
			continue
		}
		streaming := inst.snapshot != nil && inst.snapshot.IsStreaming
		f.applySnapshotLocked(a, c, inst, streaming)
		f.mu.Unlock()
	}
}

// stepInstanceLocked decides in for inst, over its agent's current
// connection, and carries the plan out; an input the instance's state
// refuses (stale) changes nothing. It reports whether the core took it.
func (f *Fleet) stepInstanceLocked(inst *instance, in coreInput) bool {
	_, _, ok, err := f.stepLocked(f.driveLocked(inst), in)
	if err != nil {
		f.log.Error().Err(err).Str("instance", inst.id).Str("input", string(in.Kind)).Msg("instance step")
	}
	return ok
}

// driveLocked is a drive of inst over its agent's current connection
// (none while it is not established).
func (f *Fleet) driveLocked(inst *instance) *drive {
	d := &drive{inst: inst, a: f.agents[inst.agent]}
	if d.a != nil {
		d.c = d.a.conn
	}
	return d
}

// onWorkerExitedLocked handles an agent's exit notice.
func (f *Fleet) onWorkerExitedLocked(a *agentState, fr *transport.WorkerExitedFrame) {
	if inst := f.core.instance(fr.InstanceID); inst != nil && inst.agent == a.name {
		f.stepInstanceLocked(inst, coreInput{Kind: inWorkerExited, Reason: exitReason(fr), SessionPath: fr.SessionPath})
	}
}

// exitReason says in words how a worker ended.
func exitReason(fr *transport.WorkerExitedFrame) string {
	var how string
	switch {
	case fr.Lost:
		how = "its shim was lost"
	case fr.Signal != "":
		how = "killed by signal " + fr.Signal
	case fr.ExitCode != nil:
		how = fmt.Sprintf("exited with code %d", int64(*fr.ExitCode))
	default:
		how = "agent reports it " + string(fr.State)
	}
	if fr.Expected {
		how += " (stopped by another server)"
	}
	return how
}

// applySnapshotLocked fires the reconcile outcome of a live worker and
// re-sends the command of a state that was waiting for the connection.
func (f *Fleet) applySnapshotLocked(a *agentState, c *transport.Conn, inst *instance, streaming bool) {
	_, after, _, err := f.stepLocked(&drive{inst: inst, a: a, c: c}, coreInput{Kind: inSnapshot, Streaming: streaming})
	if err != nil {
		f.log.Warn().Err(err).Str("instance", inst.id).Str("state", string(inst.m.State())).Msg("reconcile: command not re-sent")
	}
	for _, fn := range after {
		fn()
	}
}
