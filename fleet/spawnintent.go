package fleet

import (
	"context"
	"strings"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
)

// Spawn intents close the two windows of a spawn in which a worker could
// run on that no server knows: the connection closes after the agent
// listed the worker but before its spawned arrives (the spawn fails for
// the caller), and the server receives spawned but is killed before it
// stores the instance. The server stores each spawn (its id, agent and
// spec) before it sends the spawn frame, and removes it once Spawn
// returns. An agent that announces transport.CapabilitySpawnID lists
// each worker with the id of its spawn, also after its own restart, so
// reconcile can tell, for a worker the server does not know:
//
//   - its spawn is one a previous life of this server stored and never
//     saw answered: the worker is adopted, as if its spawned had come;
//   - its spawn id is this server's (see serverstore.Store.ServerID) but
//     no intent is stored: the spawn was given up (its caller saw it
//     fail), and the worker is stopped;
//   - another server's spawn, or none: it is left alone.
//
// A v1 agent lists no spawn ids: its workers of such a spawn are left
// alone, as before.

// spawnIDPrefix starts every spawn id: "spawn-<server id>-<hex>".
const spawnIDPrefix = "spawn-"

// newSpawnID returns a new spawn id, naming this server.
func (f *Fleet) newSpawnID() string { return spawnIDPrefix + f.serverID + "-" + f.hex(12) }

// ownSpawn reports whether spawn id was made by this server's state file.
func (f *Fleet) ownSpawn(id string) bool {
	return f.serverID != "" && strings.HasPrefix(id, spawnIDPrefix+f.serverID+"-")
}

// restoreSpawnIntents keeps the intents a previous life left, for the
// reconcile of their agents, and forgets those whose instance was stored
// (the server died between the two writes).
func (f *Fleet) restoreSpawnIntents(recs []serverstore.Instance) error {
	intents, err := f.store.SpawnIntents()
	if err != nil {
		return err
	}
	stored := map[string]bool{}
	for _, rec := range recs {
		if rec.SpawnID != "" {
			stored[rec.SpawnID] = true
		}
	}
	var done []string
	for _, in := range intents {
		if stored[in.SpawnID] {
			done = append(done, in.SpawnID)
			continue
		}
		f.core.addSpawnIntent(in)
	}
	return f.store.DeleteSpawnIntents(done...)
}

// spawnIntent is the intent Spawn stores before it sends spawn id's
// frame, for the instance rec.
func spawnIntent(id string, rec serverstore.Instance) serverstore.SpawnIntent {
	return serverstore.SpawnIntent{SpawnID: id, Machine: rec.Machine, Cwd: rec.Cwd, Bundle: rec.Bundle,
		BundleHash: rec.BundleHash, Model: rec.Model, TraceID: rec.TraceID, FromSession: rec.FromSession,
		SessionMode: rec.SessionMode, StaleBaseline: rec.StaleBaseline}
}

// queueForget queues the removal of the intents ids, logging a failure;
// nobody waits for it (one left over is settled at the agent's next
// reconnect, after a restart).
func (f *Fleet) queueForget(ids ...string) {
	if len(ids) == 0 {
		return
	}
	f.store.Queue(func(t *serverstore.Tx) error { return t.DeleteSpawnIntents(ids...) }, func(err error) {
		if err != nil {
			f.log.Warn().Err(err).Strs("spawnIds", ids).Msg("cannot remove spawn records; they are settled at their agent's next reconnect after a restart")
		}
	})
}

// spawnOutcome is what reconcile does with the workers of spawns.
type spawnOutcome struct {
	adopted []*instance
	// strays are workers of this server's spawns that it gave up.
	strays []transport.InstanceInfo
	// done are the intents to remove.
	done []string
}

// reconcileSpawnsLocked hands the core each of the agent's listed workers
// that the server does not know, under a spawn id (see the top of this
// file), and adopts or stops them as it decides.
func (f *Fleet) reconcileSpawnsLocked(a *agentState, c *transport.Conn, list []transport.InstanceInfo) spawnOutcome {
	var out spawnOutcome
	if !a.announces(transport.CapabilitySpawnID) {
		return out
	}
	// The view of the spawn a listed worker stands for: requested, by its
	// spawn id.
	v := coreView{Instance: StateRequested, Spawning: true, Connected: a.conn != nil, Pifleet: a.pifleet}
	for _, info := range list {
		if info.SpawnID == "" || f.core.instance(info.InstanceID) != nil {
			continue // no spawn id, or known
		}
		intent, stored := f.core.spawnIntent(info.SpawnID)
		s := a.spawning[info.SpawnID]
		in := coreInput{Kind: inListedSpawn,
			Recorded:  stored && intent.Machine == a.name,
			Own:       !stored && f.ownSpawn(info.SpawnID),
			Clone:     unnamedClone(intent),
			Answering: s != nil && s.spawnConn == c,
			Running:   info.State == transport.InstanceRunning}
		plan, ok := decide(v, in)
		if !ok {
			continue
		}
		for i, e := range plan {
			if e.Kind == fxStray {
				out.strays = append(out.strays, info)
			}
			if e.Kind == fxAdopt {
				inst := f.adoptLocked(intent)
				d := f.driveLocked(inst)
				d.spawned = &info
				if _, _, err := f.applyLocked(d, plan[i+1:]); err != nil {
					f.log.Error().Err(err).Str("spawnId", info.SpawnID).Msg("reconcile: adopting a spawn's worker")
				}
				f.log.Warn().Str("agent", a.name).Str("instance", inst.id).Str("spawnId", info.SpawnID).
					Msg("adopted the worker of a spawn whose answer the server had not stored")
				out.adopted = append(out.adopted, inst)
				break
			}
		}
	}
	// Every intent of the agent is settled by its listing: adopted or
	// stopped above, or not listed (the agent never started the worker,
	// or gave it up with the connection that asked for it).
	for id, in := range f.core.allSpawnIntents() {
		if in.Machine == a.name {
			f.core.dropSpawnIntent(id)
			out.done = append(out.done, id)
		}
	}
	return out
}

// unnamedClone: the spawn cloned a session, and only its caller gives the
// clone its name; it carries its baseline's name until then, and must
// not live on unnamed.
func unnamedClone(in serverstore.SpawnIntent) bool {
	return in.FromSession != "" && in.SessionMode != string(transport.SessionAttach)
}

// adoptLocked builds the instance of a listed worker whose spawn's answer
// a previous life of the server never stored, from the spawn's intent;
// the core's plan registers it as that answer would have.
func (f *Fleet) adoptLocked(in serverstore.SpawnIntent) *instance {
	rec := serverstore.Instance{Machine: in.Machine, Cwd: in.Cwd, Bundle: in.Bundle, BundleHash: in.BundleHash,
		Model: in.Model, TraceID: in.TraceID, FromSession: in.FromSession, SessionMode: in.SessionMode,
		StaleBaseline: in.StaleBaseline, SpawnID: in.SpawnID, State: string(StateRequested)}
	inst := newInstance(f, "", in.Machine, rec, InstanceTable.Start())
	inst.spawnID = in.SpawnID
	f.applyManifest(inst)
	return inst
}

// settleSpawns finishes what reconcileSpawnsLocked decided, outside the
// fleet's lock: once the adopted instances' records are durable, the
// settled intents are removed; then the given-up spawns' workers are
// stopped.
func (f *Fleet) settleSpawns(ctx context.Context, a *agentState, c *transport.Conn, out spawnOutcome, adopted []*serverstore.Pending) {
	stored := true
	for _, p := range adopted {
		if err := f.waitWritten(p); err != nil {
			f.log.Error().Err(err).Str("agent", a.name).Msg("reconcile: an adopted worker's record was not stored; its spawn is kept for the next reconnect")
			stored = false
		}
	}
	if stored {
		f.queueForget(out.done...)
	}
	f.stopStrays(ctx, a, c, out.strays)
}

// strayStopped is logged once the agent stopped a given-up spawn's worker.
const strayStopped = "the worker of a given-up spawn is stopped"

// stopStrays stops the workers of spawns this server gave up.
func (f *Fleet) stopStrays(ctx context.Context, a *agentState, c *transport.Conn, strays []transport.InstanceInfo) {
	for _, info := range strays {
		f.log.Warn().Str("agent", a.name).Str("instance", info.InstanceID).Str("spawnId", info.SpawnID).
			Msg("stopping the worker of a spawn that was given up (its answer never came)")
		ans, err := c.Request(ctx, &transport.StopFrame{InstanceID: info.InstanceID})
		if err != nil {
			f.log.Warn().Err(err).Str("instance", info.InstanceID).Msg("stop of a given-up spawn's worker failed; tried again at the next reconnect")
			continue
		}
		if e, ok := ans.(*transport.ErrorFrame); ok {
			f.log.Warn().Str("code", e.Code).Str("msg", e.Message).Str("instance", info.InstanceID).Msg("stop of a given-up spawn's worker refused")
			continue
		}
		f.log.Info().Str("agent", a.name).Str("instance", info.InstanceID).Msg(strayStopped)
	}
}

// fleetHooks are points of the fleet's work a test can hold it at (to
// kill the process there); each is nil outside tests.
type fleetHooks struct {
	// spawnedReceived runs when a spawn's answer spawned arrived, before
	// anything of it is stored.
	spawnedReceived func()
}
