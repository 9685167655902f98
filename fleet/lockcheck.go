package fleet

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// fleetMutex is the fleet-wide lock (Fleet.mu). In the package's own
// tests (lockCheck) it knows which goroutine holds it, and the state
// store calls mustNotHold before every wait for the disk: a goroutine
// that would wait for an fsync while every agent and SDK call waits for
// it panics there, naming the wait, instead of only being slow.
//
// With lockTiming (a benchmark's) it also keeps how long each hold
// lasted.
type fleetMutex struct {
	sync.Mutex
	holder atomic.Int64
	// since and holds are guarded by the mutex itself.
	since time.Time
	holds []time.Duration
}

// lockCheck turns the holder bookkeeping on; the tests set it (it costs a
// stack read per Lock). lockTiming turns the hold times on.
var lockCheck, lockTiming atomic.Bool

func (m *fleetMutex) Lock() {
	m.Mutex.Lock()
	if lockCheck.Load() {
		m.holder.Store(goroutineID())
	}
	if lockTiming.Load() {
		m.since = time.Now()
	}
}

func (m *fleetMutex) Unlock() {
	m.holder.Store(0)
	if !m.since.IsZero() {
		m.holds = append(m.holds, time.Since(m.since))
		m.since = time.Time{}
	}
	m.Mutex.Unlock()
}

// mustNotHold panics when the calling goroutine holds m (lockCheck only).
func (m *fleetMutex) mustNotHold() {
	if lockCheck.Load() && m.holder.Load() == goroutineID() {
		panic("fleet: a wait for the state file while holding the fleet lock")
	}
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
