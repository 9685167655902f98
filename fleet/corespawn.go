package fleet

import "example.com/pifleet/transport"

// The decision core's part of a spawn (core.go): from the SDK's request to
// the agent's answer, a cancel, a lost connection or a stop in between.
//
// The instance goes by its spawn id until the answer names the worker
// (coreView.Spawning). Its spawn states are not persisted: what makes the
// spawn durable is its intent (spawnintent.go), stored before the spawn
// frame is sent and dropped once the caller's Spawn has its outcome, after
// the spawned instance's record was queued (the state store commits in
// the order it was given the writes, so the record is never lost while
// its intent is dropped).

// Spawn failures, as effect.Reason of fxSpawnFailed says them.
const (
	spawnRefused   = "refused"   // the agent answered spawn_error (or an error): Code, Text
	spawnStopped   = "stopped"   // stopped during its spawn
	spawnLost      = "lost"      // the connection closed before the answer
	spawnCancelled = "cancelled" // the caller's context ended first
)

// decideSpawn is the plan of a spawn's input; ok is false when the view
// refuses it (a duplicate or stale answer, a spawn that ended).
func (p *plan) decideSpawn(in coreInput) bool {
	v := p.v
	switch in.Kind {
	case inSpawn:
		if !v.Spawning || v.Instance != StateRequested || v.Intent || v.SpawnSent {
			return false
		}
		// The spawn is durable before its frame is sent: a server killed
		// before it stored the answer adopts the worker once restarted,
		// and a spawn given up leaves a worker that the agent's next
		// listing stops.
		p.add(effect{Kind: fxIntent})
		p.v.Intent = true
		p.send(frSpawn)
		p.add(effect{Kind: fxTrack})
		p.v.SpawnSent = true

	case inSpawnProgress:
		if !v.Spawning || !isSpawnState(v.Instance) {
			return false // unknown, or stopped during its spawn: its answer ends it
		}
		// A step the agent did not report is fired first; one that
		// arrives late is stale and moves nothing.
		switch in.Phase {
		case transport.SpawnAccepted:
			p.instance(EventSpawnAccepted)
		case transport.SpawnProvisioning:
			p.instance(EventSpawnAccepted)
			p.instance(EventProvisioningStarted)
		case transport.SpawnDegraded:
			p.instance(EventProvisioningStarted)
			if p.instance(EventCacheDegraded) {
				p.add(effect{Kind: fxDegraded})
			}
		}
		p.add(effect{Kind: fxProgress})

	case inSpawned:
		if !v.Spawning || !(isSpawnState(v.Instance) || v.Instance == StateStopping) {
			return false // a duplicate or stale answer
		}
		p.add(effect{Kind: fxUntrack})
		if v.Instance == StateStopping {
			// Stopped during its spawn, and the agent had started the
			// worker (or knows no spawn_cancel): it is registered, and
			// stopped.
			p.add(effect{Kind: fxAdd})
			p.v.Spawning = false
			p.instDirty = true
			p.persist()
			p.forget()
			p.add(effect{Kind: fxSpawnFailed, Reason: spawnStopped})
			// The stop waits for no write: a server killed before the
			// record is stored finds the spawn's intent, and the worker
			// stopped (or, when the stop never left, adopts it).
			p.add(effect{Kind: fxSend, Frame: frStop, Free: true})
			break
		}
		p.spawned()

	case inSpawnError:
		if !v.Spawning {
			return false
		}
		switch {
		case v.Instance == StateStopping:
			// spawn_cancelled, or any refusal: no worker runs.
			p.spawnEnds(effect{Reason: spawnStopped}, "stopped during its spawn", EventStoppedGracefully)
		case canInstance(v.Instance, EventSpawnError):
			p.spawnEnds(effect{Reason: spawnRefused, Code: in.Code, Text: in.Text}, "", EventSpawnError)
		default:
			return false
		}
		p.forget()

	case inSpawnCancel:
		// The caller gave up while the answer is still to come: the spawn
		// is stopped as by Stop, so that no worker is left behind on the
		// agent; its answer ends the instance.
		if !v.Spawning || !isSpawnState(v.Instance) {
			return false
		}
		if !v.SpawnSent {
			p.notSent(spawnCancelled)
			break
		}
		p.stopSpawn()
		p.forget()
		p.add(effect{Kind: fxSpawnFailed, Reason: spawnCancelled})

	case inSpawnLost:
		// The connection closed before the answer: the agent gives a
		// spawn up with the connection that asked for it (a worker it
		// started all the same is stopped at its next listing: its spawn
		// has no intent any more).
		if !v.Spawning {
			return false
		}
		switch {
		case !v.SpawnSent && v.Instance == StateRequested:
			p.notSent(spawnLost)
			return true
		case v.Instance == StateStopping:
			p.spawnEnds(effect{Reason: spawnStopped}, "connection lost while its spawn was being stopped", EventWorkerGone)
		case canInstance(v.Instance, EventSpawnError):
			p.spawnEnds(effect{Reason: spawnLost}, "", EventSpawnError)
		default:
			return false
		}
		p.forget()

	case inListedSpawn:
		// The view is the spawn the listing stands for (requested, by
		// its spawn id). Every intent of the agent is settled by its
		// listing: the driver drops them once the adopted workers'
		// records are stored.
		if !v.Spawning || v.Instance != StateRequested || in.Answering || !in.Running {
			return false // its answer is still to come on this connection, or the worker ended
		}
		switch {
		case in.Recorded && !in.Clone:
			// A previous life of the server stored the spawn and never
			// its answer: the worker is adopted, as that answer would
			// have registered it.
			p.add(effect{Kind: fxAdopt})
			p.spawned()
		case in.Recorded, in.Own:
			// A spawn this server gave up (its caller saw it fail), or a
			// clone only its caller could name: the worker must not live.
			p.add(effect{Kind: fxStray})
		default:
			return false // another server's spawn: left alone
		}

	default:
		return false
	}
	return true
}

// spawned registers the worker the spawn started. A TypeScript agent
// answers spawned at once: the steps it did not report are fired first,
// while the instance has no id, so that nothing is stored before its
// spawned state (a server killed in between finds the intent alone, and
// adopts the worker by it).
func (p *plan) spawned() {
	p.instance(EventSpawnAccepted)
	p.instance(EventProvisioningStarted)
	p.add(effect{Kind: fxAdd})
	p.v.Spawning = false
	p.add(effect{Kind: fxDescribe})
	p.instance(EventSpawned)
	p.persist()
	p.forget()
	p.add(effect{Kind: fxReplay})
}

// stopSpawn stops an instance that is being spawned: stopping until the
// spawn's answer. An agent that knows spawn_cancel gives the spawn up at
// once (its frame is queued before anything changes); another one answers
// spawned, and the worker is stopped then.
func (p *plan) stopSpawn() {
	if p.v.Connected && p.v.SpawnCancel {
		p.send(frSpawnCancel)
	}
	p.instance(EventStopRequested)
}

// spawnEnds ends a spawn that was sent but will not run a worker: it is
// no longer in flight, its caller fails as failed says (its Reason, Code
// and Text), the instance's record notes why it ended (reason, if any) and
// the instance takes ev.
func (p *plan) spawnEnds(failed effect, reason string, ev InstanceEvent) {
	p.add(effect{Kind: fxUntrack})
	failed.Kind = fxSpawnFailed
	p.add(failed)
	if reason != "" {
		p.add(effect{Kind: fxReason, Reason: reason})
	}
	p.instance(ev)
}

// notSent gives up a spawn whose frame was never queued (the caller's
// context ended while its intent was written, or the frame could not be
// sent): nothing is to be stopped or settled, and nobody saw the
// instance; its intent goes.
func (p *plan) notSent(why string) {
	p.forget()
	p.add(effect{Kind: fxSpawnFailed, Reason: why})
}

// forget drops the spawn's intent once, when it is stored.
func (p *plan) forget() {
	if p.v.Intent {
		p.add(effect{Kind: fxForget})
		p.v.Intent = false
	}
}

// isSpawnInput reports the inputs decideSpawn takes.
func isSpawnInput(k inputKind) bool {
	switch k {
	case inSpawn, inSpawnProgress, inSpawned, inSpawnError, inSpawnCancel, inSpawnLost, inListedSpawn:
		return true
	}
	return false
}
