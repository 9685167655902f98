package fleet

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// fleetMutex is the fleet-wide lock (Fleet.mu). Lock takes the
// instance and task core's lock (core, Fleet.core's) and then the fleet
// lock, and Unlock releases both, so that every section under the fleet
// lock may change the core; lockAgents takes the fleet lock alone, for a
// section that changes nothing of the core (an agent's connection),
// which the core's readers then do not wait for. The core's lock comes
// first so that the fleet lock is never held while waiting for the
// core's readers to finish.
//
// In the package's own tests (lockCheck) it knows which goroutine holds
// it, and the state store calls mustNotHold before every wait for the
// disk: a goroutine that would wait for an fsync while holding the fleet
// lock or the core's (which every agent and SDK call waits for) panics
// there, naming the wait, instead of only being slow.
//
// With lockTiming (a benchmark's) it also keeps how long each hold
// lasted.
type fleetMutex struct {
	sync.Mutex
	holder atomic.Int64
	// core is taken by Lock (nil: a fleetMutex of its own, in tests).
	core *coreMutex
	// coreHeld, since and holds are guarded by the mutex itself.
	coreHeld bool
	since    time.Time
	holds    []time.Duration
}

// lockCheck turns the holder bookkeeping on; the tests set it (it costs a
// stack read per Lock). lockTiming turns the hold times on.
var lockCheck, lockTiming atomic.Bool

// Lock takes the core's lock, and then the fleet lock.
func (m *fleetMutex) Lock() {
	if m.core != nil {
		m.core.Lock()
	}
	m.lock()
	m.coreHeld = m.core != nil
}

// lockAgents takes the fleet lock without the core's: the section may
// read the instances and tasks (their writers hold the fleet lock too),
// never change them, and must not take the core's lock (a writer may be
// holding it while it waits for the fleet lock).
func (m *fleetMutex) lockAgents() { m.lock() }

func (m *fleetMutex) lock() {
	m.Mutex.Lock()
	if lockCheck.Load() {
		m.holder.Store(goroutineID())
	}
	if lockTiming.Load() {
		m.since = time.Now()
	}
}

func (m *fleetMutex) Unlock() {
	core := m.coreHeld
	m.coreHeld = false
	m.holder.Store(0)
	if !m.since.IsZero() {
		m.holds = append(m.holds, time.Since(m.since))
		m.since = time.Time{}
	}
	m.Mutex.Unlock()
	if core {
		m.core.Unlock()
	}
}

// mustNotHold panics when the calling goroutine holds m, or the core's
// lock, for writing or for reading (lockCheck only).
func (m *fleetMutex) mustNotHold() {
	if !lockCheck.Load() {
		return
	}
	g := goroutineID()
	if m.holder.Load() == g {
		panic("fleet: a wait for the state file while holding the fleet lock")
	}
	if m.core != nil && m.core.heldBy(g) {
		panic("fleet: a wait for the state file while holding the instance and task core's lock")
	}
}

// coreMutex is the instance and task core's lock (coreState.mu): its
// writers go on to take the fleet lock (fleetMutex.Lock takes both), its
// readers take it alone (RLock). With lockCheck it knows the goroutines that hold
// it, for fleetMutex.mustNotHold.
type coreMutex struct {
	sync.RWMutex
	writer  atomic.Int64
	readers sync.Map // goroutine id → struct{}
}

func (m *coreMutex) Lock() {
	m.RWMutex.Lock()
	if lockCheck.Load() {
		m.writer.Store(goroutineID())
	}
}

func (m *coreMutex) Unlock() {
	m.writer.Store(0)
	m.RWMutex.Unlock()
}

// RLock takes the lock for reading. A goroutine takes it once at a time
// (a second RLock waits behind a waiting writer: a deadlock).
func (m *coreMutex) RLock() {
	m.RWMutex.RLock()
	if lockCheck.Load() {
		m.readers.Store(goroutineID(), struct{}{})
	}
}

func (m *coreMutex) RUnlock() {
	if lockCheck.Load() {
		m.readers.Delete(goroutineID())
	}
	m.RWMutex.RUnlock()
}

// heldBy reports whether goroutine g holds m (lockCheck only).
func (m *coreMutex) heldBy(g int64) bool {
	if m.writer.Load() == g {
		return true
	}
	_, reading := m.readers.Load(g)
	return reading
}

// goroutineID reads the calling goroutine's number from its stack header
// ("goroutine 17 [running]:").
func goroutineID() int64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseInt(string(b), 10, 64)
	return id
}
