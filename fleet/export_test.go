package fleet

// SetSpawnedHold makes f call hold when a spawn's spawned arrives, before
// anything of it is stored (under the fleet's lock: the fleet stands
// still while hold runs). Set it before Start.
func SetSpawnedHold(f *Fleet, hold func()) { f.hooks.spawnedReceived = hold }

// StrayStopped is the message the fleet logs once the agent stopped the
// worker of a spawn it gave up.
const StrayStopped = strayStopped
