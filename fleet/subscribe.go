package fleet

import (
	"sync"
	"time"
)

// ChangeKind says what a Change reports.
type ChangeKind string

// Change kinds.
const (
	ChangeAgentState     ChangeKind = "agent_state"     // a connection transition (From, To, Event)
	ChangeInstanceState  ChangeKind = "instance_state"  // an instance transition
	ChangeTaskState      ChangeKind = "task_state"      // a task's review state
	ChangeEvent          ChangeKind = "event"           // a worker event (WorkerEvent)
	ChangeTaskDone       ChangeKind = "task_done"       // a new task_done (Report)
	ChangeEscalated      ChangeKind = "escalated"       // a task waits for a human (TaskID)
	ChangeUIRequest      ChangeKind = "ui_request"      // a worker dialog waits for an answer (UI)
	ChangeUIEnded        ChangeKind = "ui_ended"        // a worker dialog ended without an answer (UI; Message says how)
	ChangeSpawnProgress  ChangeKind = "spawn_progress"  // a spawn step (Event is the phase)
	ChangeModelDrift     ChangeKind = "model_drift"     // a worker's model changed (Message)
	ChangeSessions       ChangeKind = "sessions"        // an agent's session inventory changed
	ChangeSessionEntries ChangeKind = "session_entries" // a catch-up of a worker's session ended (Message: entries mirrored)
)

// Change is one thing that happened in the fleet.
type Change struct {
	Kind       ChangeKind
	At         time.Time
	Agent      string
	InstanceID string
	TaskID     string
	// Event is the machine event (state changes), the spawn phase, or the
	// worker event's type.
	Event    string
	From, To string
	// WorkerEvent is set for ChangeEvent.
	WorkerEvent *Event
	// Report is set for ChangeTaskDone.
	Report *TaskReport
	// UI is set for ChangeUIRequest and ChangeUIEnded.
	UI *UIRequest
	// Message is free text (an error, a drift description).
	Message string
}

// Subscription receives Changes on C until Close. A subscriber that does
// not keep up loses changes (counted by Dropped) rather than slowing the
// fleet down.
type Subscription struct {
	C    <-chan Change
	c    chan Change
	subs *subscribers
	// Guarded by subs.mu.
	dropped uint64
	closed  bool
}

// subscribers is the fleet's set of Subscriptions.
//
// Its lock guards the set, its closed flag, and each subscription's
// dropped count and closed flag. It is the innermost lock of the fleet:
// publish is called with Fleet.mu held (so that subscribers see changes
// in the order the transitions happened), and nothing is called or
// locked while it is held but non-blocking channel sends.
type subscribers struct {
	now func() time.Time

	mu     sync.Mutex
	set    map[*Subscription]struct{}
	closed bool // the fleet closed: a new subscription is closed at once
}

func newSubscribers(now func() time.Time) *subscribers {
	return &subscribers{now: now, set: map[*Subscription]struct{}{}}
}

// Subscribe returns a subscription whose channel holds up to buffer
// changes (at least 1).
func (f *Fleet) Subscribe(buffer int) *Subscription {
	return f.subs.subscribe(buffer)
}

func (ss *subscribers) subscribe(buffer int) *Subscription {
	c := make(chan Change, max(buffer, 1))
	s := &Subscription{C: c, c: c, subs: ss}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		s.closeLocked()
		return s
	}
	ss.set[s] = struct{}{}
	return s
}

// Close ends the subscription and closes C.
func (s *Subscription) Close() {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	delete(s.subs.set, s)
	s.closeLocked()
}

// Dropped returns how many changes did not fit in the buffer.
func (s *Subscription) Dropped() uint64 {
	s.subs.mu.Lock()
	defer s.subs.mu.Unlock()
	return s.dropped
}

// closeLocked closes C once. subs.mu must be held.
func (s *Subscription) closeLocked() {
	if !s.closed {
		s.closed = true
		close(s.c)
	}
}

// publish hands c to every subscriber that has room for it.
func (ss *subscribers) publish(c Change) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.set) == 0 {
		return
	}
	c.At = ss.now()
	for s := range ss.set {
		select {
		case s.c <- c:
		default:
			s.dropped++
		}
	}
}

// close ends every subscription, and those made from now on.
func (ss *subscribers) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for s := range ss.set {
		s.closeLocked()
		delete(ss.set, s)
	}
}

// publishLocked publishes c. f.mu is held, so that changes reach the
// subscribers in the order the transitions they report happened.
func (f *Fleet) publishLocked(c Change) { f.subs.publish(c) }
