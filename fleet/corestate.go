package fleet

import (
	"iter"
	"maps"

	"example.com/pifleet/fleet/internal/serverstore"
)

// coreState is the instance and task core: every instance the fleet
// tracks (by id, and by agent), every task, and the two small sets that
// are kept by instance: the catch-ups running and the spawns a previous
// life left unanswered. The decision core (core.go) decides on what it
// holds and its driver (drive.go) changes it; nothing else reaches into
// its maps.
//
// # Locking
//
// The core has its own lock, mu, in the style of Fleet.dirMu: it guards
// the maps below and every field of the instances and tasks in them (and
// of the instances being spawned, agentState.spawning). It is written
// holding mu and f.mu, which f.mu.Lock takes by itself (mu first, see
// fleetMutex): any section under the fleet lock may change the core. It
// is read holding either: a read that needs nothing else of f.mu's (an
// SDK getter, Status, the control API's reads) takes mu.RLock alone, and
// so waits only for sections that may change the core, never for one
// that deals with an agent's connection only (f.mu.lockAgents), nor for
// another reader. A reader may take dirMu, the session set's and the
// subscribers' locks after it, never f.mu (lock order: Fleet), and never
// waits for the disk (lockcheck.go).
//
// The methods are called with f.mu held, or mu held for reading (the
// lookups and iterations), or before the fleet is shared (New's restore).
//
// Instances are never removed: an ended one stays, final, so that its
// handles and the tasks that name it keep answering. An id registered
// again under another agent (ids are the agents' own) replaces the old
// instance and leaves that agent's index.
type coreState struct {
	mu        coreMutex
	instances map[string]*instance
	// byAgent indexes instances by agent name, so that a connection's
	// loss or return touches its own agent's instances only.
	byAgent map[string]map[string]*instance
	tasks   map[string]*task
	// catching marks the instances whose catch-up runs; true asks it to
	// run once more (sessions.go: scheduleCatchUpLocked); no reader needs
	// it without f.mu, which it is read with. A catch-up is
	// started only while the fleet runs, with f.wg added under the same
	// f.mu that checked the lifecycle, so that Close cannot be waiting
	// yet, and its "once more?" is read together with the lifecycle.
	catching map[string]bool
	// spawnIntents are the spawns a previous life stored and never saw
	// answered, by spawn id, until their agent's next reconcile
	// (spawnintent.go); read with f.mu, like catching.
	spawnIntents map[string]serverstore.SpawnIntent
}

func newCoreState() coreState {
	return coreState{
		instances:    map[string]*instance{},
		byAgent:      map[string]map[string]*instance{},
		tasks:        map[string]*task{},
		catching:     map[string]bool{},
		spawnIntents: map[string]serverstore.SpawnIntent{},
	}
}

// ---- instances ----

// instance returns the instance registered under id, or nil.
func (c *coreState) instance(id string) *instance { return c.instances[id] }

// addInstance registers inst under its id and in its agent's index.
func (c *coreState) addInstance(inst *instance) {
	if old := c.instances[inst.id]; old != nil && old.agent != inst.agent {
		delete(c.byAgent[old.agent], inst.id)
	}
	c.instances[inst.id] = inst
	of := c.byAgent[inst.agent]
	if of == nil {
		of = map[string]*instance{}
		c.byAgent[inst.agent] = of
	}
	of[inst.id] = inst
}

// allInstances yields every instance by its id, in no order.
func (c *coreState) allInstances() iter.Seq2[string, *instance] { return maps.All(c.instances) }

// agentInstances yields agent's instances, in no order.
func (c *coreState) agentInstances(agent string) iter.Seq[*instance] {
	return maps.Values(c.byAgent[agent])
}

// ---- tasks ----

// task returns the task id, or nil.
func (c *coreState) task(id string) *task { return c.tasks[id] }

// addTask registers t under its id.
func (c *coreState) addTask(t *task) { c.tasks[t.rec.TaskID] = t }

// removeTask takes t out again, when it is still the one under its id
// (Submit's undo of a task whose prompt could not be sent).
func (c *coreState) removeTask(t *task) {
	if c.tasks[t.rec.TaskID] == t {
		delete(c.tasks, t.rec.TaskID)
	}
}

// allTasks yields every task, in no order.
func (c *coreState) allTasks() iter.Seq[*task] { return maps.Values(c.tasks) }

// taskCount is the number of tasks.
func (c *coreState) taskCount() int { return len(c.tasks) }

// ---- catch-ups (sessions.go) ----

// catchUp marks instance id's catch-up: pending when one runs, and again
// whether it is asked to run once more.
func (c *coreState) catchUp(id string) (again, pending bool) {
	again, pending = c.catching[id]
	return again, pending
}

// setCatchUp marks id's catch-up as running, asked to run once more or
// not.
func (c *coreState) setCatchUp(id string, again bool) { c.catching[id] = again }

// endCatchUp forgets id's catch-up.
func (c *coreState) endCatchUp(id string) { delete(c.catching, id) }

// ---- spawns a previous life left (spawnintent.go) ----

// addSpawnIntent keeps in until its agent's next reconcile.
func (c *coreState) addSpawnIntent(in serverstore.SpawnIntent) { c.spawnIntents[in.SpawnID] = in }

// spawnIntent returns the intent stored under spawnID.
func (c *coreState) spawnIntent(spawnID string) (serverstore.SpawnIntent, bool) {
	in, ok := c.spawnIntents[spawnID]
	return in, ok
}

// allSpawnIntents yields the intents by spawn id, in no order; the loop may
// drop the one it is given (dropSpawnIntent).
func (c *coreState) allSpawnIntents() iter.Seq2[string, serverstore.SpawnIntent] {
	return maps.All(c.spawnIntents)
}

// dropSpawnIntent forgets the intent stored under spawnID.
func (c *coreState) dropSpawnIntent(spawnID string) { delete(c.spawnIntents, spawnID) }
