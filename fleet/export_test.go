package fleet

import "example.com/pifleet/transport"

// AgentConn is agent name's connection (nil while it has none).
func AgentConn(f *Fleet, name string) *transport.Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a := f.agents[name]; a != nil {
		return a.conn
	}
	return nil
}

// SetSpawnedHold makes f call hold when a spawn's spawned arrives, before
// anything of it is stored (under the fleet's lock: the fleet stands
// still while hold runs). Set it before Start.
func SetSpawnedHold(f *Fleet, hold func()) { f.hooks.spawnedReceived = hold }

// StrayStopped is the message the fleet logs once the agent stopped the
// worker of a spawn it gave up.
const StrayStopped = strayStopped

// DialogsKept is how many dialogs the fleet remembers for instance id,
// pending or ended, with the deadlines pi's own timeouts set for them.
func DialogsKept(f *Fleet, id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	inst := f.core.instance(id)
	if inst == nil {
		return 0
	}
	return len(inst.ui) + len(inst.uiDeadline)
}

// MaxEndedDialogs is how many ended dialogs an instance remembers.
const MaxEndedDialogs = maxEndedDialogs
