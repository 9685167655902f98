package fleet

import (
	"context"
	"fmt"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
)

// The driver's part of a spawn (corespawn.go decides): the agent's answers
// and progress frames become the core's inputs, and the spawn's effects
// are carried out on the fleet's records.

// spawnAnswer hands the answer to inst's spawn frame to the core; it runs
// under f.mu, on the agent's frame goroutine, before the answer reaches
// Spawn's waiter.
func (f *Fleet) spawnAnswer(inst *instance) func(transport.Frame) {
	return func(ans transport.Frame) {
		switch ans := ans.(type) {
		case *transport.SpawnedFrame:
			f.spawnedLocked(inst, &ans.Instance)
		case *transport.SpawnErrorFrame:
			f.stepSpawnLocked(f.driveLocked(inst), coreInput{Kind: inSpawnError, Code: ans.Code, Text: ans.Message})
		case *transport.ErrorFrame:
			f.stepSpawnLocked(f.driveLocked(inst), coreInput{Kind: inSpawnError, Code: ans.Code, Text: ans.Message})
		}
	}
}

// spawnedLocked hands the core a spawned answer for inst (or, for a
// worker adopted at reconcile, the listing that stands for it).
func (f *Fleet) spawnedLocked(inst *instance, info *transport.InstanceInfo) {
	if f.hooks.spawnedReceived != nil {
		f.hooks.spawnedReceived()
	}
	d := f.driveLocked(inst)
	d.spawned = info
	f.stepSpawnLocked(d, coreInput{Kind: inSpawned})
}

// stepSpawnLocked decides a spawn's input and carries the plan out; a
// failure (a stop that could not be queued: it is sent again after the
// reconnect) is logged.
func (f *Fleet) stepSpawnLocked(d *drive, in coreInput) []func() {
	_, after, _, err := f.stepLocked(d, in)
	if err != nil {
		f.log.Warn().Err(err).Str("instance", d.inst.ref()).Str("input", string(in.Kind)).Msg("spawn step")
	}
	return after
}

// spawnGivenUpLocked hands the core a spawn whose caller stopped waiting
// with err: for its answer w, its context ended while the answer is still
// to come (the spawn is cancelled), or the connection closed before it;
// with no w, the frame was not sent (the context ended while the intent
// was written, or the send failed). It returns the error Spawn fails
// with.
func (f *Fleet) spawnGivenUpLocked(ctx context.Context, inst *instance, w *waiter, err error) error {
	d := f.driveLocked(inst)
	d.spawnCause = err
	in := coreInput{Kind: inSpawnLost}
	if ctx.Err() != nil && (w == nil || d.a != nil && d.a.waiters[inst.spawnID] == w) {
		in.Kind = inSpawnCancel
	}
	_, _, ok, serr := f.stepLocked(d, in)
	if serr != nil && in.Kind == inSpawnCancel {
		f.log.Warn().Err(serr).Str("spawnId", inst.spawnID).Msg("spawn_cancel not sent: the worker is stopped once spawned")
		d.noSpawnCancel = true
		_, _, ok, _ = f.stepLocked(d, in)
	}
	if !ok && in.Kind == inSpawnCancel {
		f.stepLocked(d, coreInput{Kind: inSpawnLost})
	}
	if inst.spawnErr != nil {
		return inst.spawnErr
	}
	return err
}

// spawnsLostLocked hands the core every spawn of a still waiting for its
// answer once a's connection is lost: the agent gives them up with it.
// One whose caller is gone (it cancelled, the spawn is stopping) has
// nobody else to end it; a worker the agent started all the same is
// stopped at the reconnect's listing, as the spawn of this server it gave
// up.
func (f *Fleet) spawnsLostLocked(a *agentState) {
	for _, inst := range a.spawning {
		f.stepSpawnLocked(f.driveLocked(inst), coreInput{Kind: inSpawnLost})
	}
}

// onSpawnProgressLocked hands a spawn_progress frame to the core.
func (f *Fleet) onSpawnProgressLocked(a *agentState, fr *transport.SpawnProgressFrame) []func() {
	inst := a.spawning[fr.SpawnID]
	if inst == nil {
		return nil // unknown
	}
	d := f.driveLocked(inst)
	d.progress = fr
	return f.stepSpawnLocked(d, coreInput{Kind: inSpawnProgress, Phase: fr.Phase})
}

// applySpawnLocked carries out a spawn's effect e (applyLocked); after
// (not nil) is what must run once f.mu is released.
func (f *Fleet) applySpawnLocked(d *drive, e effect) (after func()) {
	inst := d.inst
	switch e.Kind {
	case fxForget:
		inst.intent = false
		f.queueForget(inst.spawnID)
	case fxTrack:
		d.a.spawning[inst.spawnID] = inst
		inst.spawnConn = d.c
		f.log.Info().Str("agent", inst.agent).Str("bundle", inst.rec.Bundle).Str("traceId", inst.rec.TraceID).Msg("spawn sent")
	case fxUntrack:
		if a := f.agents[inst.agent]; a != nil && a.spawning[inst.spawnID] == inst {
			delete(a.spawning, inst.spawnID)
			delete(a.waiters, inst.spawnID)
		}
	case fxAdd:
		inst.id = d.spawned.InstanceID
		inst.rec.InstanceID = d.spawned.InstanceID
		inst.rec.SessionPath = d.spawned.SessionPath
		f.addInstanceLocked(inst)
	case fxDescribe:
		info := d.spawned
		if info.BundleHash != "" {
			inst.rec.BundleHash = info.BundleHash
		}
		if info.Model != nil {
			inst.rec.Model = &serverstore.ModelRef{Provider: info.Model.Provider, ID: info.Model.ID, Thinking: info.Model.Thinking}
		}
		inst.rec.ModelPinned = info.ModelPinned
		if w := info.Worktree; w != nil {
			inst.rec.Worktree = &serverstore.Worktree{Repo: w.Repo, Path: w.Path, Branch: w.Branch, Base: w.Base, BaseRef: w.BaseRef}
		}
		f.annotateSpawnedLocked(inst)
	case fxReplay:
		if a := f.agents[inst.agent]; a != nil {
			for _, ev := range a.orphans[inst.id] {
				f.onEventLocked(a, ev, nil, nil)
			}
			delete(a.orphans, inst.id)
		}
	case fxDegraded:
		inst.rec.Degraded = true
	case fxProgress:
		fr := d.progress
		f.publishLocked(Change{Kind: ChangeSpawnProgress, Agent: inst.agent, InstanceID: fr.SpawnID, Event: string(fr.Phase), Message: fr.Message})
		if fn := inst.onProgress; fn != nil {
			p := SpawnProgress{SpawnID: fr.SpawnID, Phase: string(fr.Phase), Bundle: fr.Bundle, BundleHash: fr.BundleHash, Message: fr.Message,
				FilesTotal: num(fr.FilesTotal), FilesFetched: num(fr.FilesFetched), FilesReused: num(fr.FilesReused),
				BytesFetched: num(fr.BytesFetched), BytesReused: num(fr.BytesReused)}
			return func() { fn(p) }
		}
	case fxSpawnFailed:
		bundle := inst.rec.Bundle
		switch e.Reason {
		case spawnRefused:
			inst.spawnErr = &SpawnError{Agent: inst.agent, Bundle: bundle, Code: e.Code, Message: e.Text}
		case spawnStopped:
			inst.spawnErr = &SpawnStoppedError{Agent: inst.agent, Bundle: bundle, SpawnID: inst.spawnID}
		default: // lost, cancelled: the caller's own error
			inst.spawnErr = d.spawnCause
			if inst.spawnErr == nil {
				inst.spawnErr = fmt.Errorf("%w: connection lost before the answer", ErrNotConnected)
			}
		}
	}
	return nil
}

// queueSpawnIntentLocked queues the write of inst's spawn intent.
func (f *Fleet) queueSpawnIntentLocked(inst *instance) *serverstore.Pending {
	in := spawnIntent(inst.spawnID, inst.rec)
	inst.intent = true
	return f.queueLocked(func(tx *serverstore.Tx) error {
		if err := tx.PutSpawnIntent(in); err != nil {
			return fmt.Errorf("fleet: spawn: cannot record the spawn: %w", err)
		}
		return nil
	}, func(err error) {
		f.log.Error().Err(err).Str("spawnId", in.SpawnID).Msg("spawn intent")
	})
}
