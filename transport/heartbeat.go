package transport

import (
	"sync"
	"time"
)

// Heartbeats sends the heartbeats of many connections from one goroutine
// per heartbeat interval, instead of each connection's writer waking on a
// timer of its own: a server with 10,000 agents would otherwise wake
// 10,000 goroutines every round. Share one among the connections of a
// server or an agent through Options.Heartbeats; a Conn without one gets
// one of its own.
//
// Each round, a connection that wrote anything since half an interval
// ago sends no heartbeat: its peer's expiry is re-armed by any byte it
// reads (the protocol's rule, the TypeScript peer's too), so a busy
// connection costs no heartbeat writes and an idle one is heard from at
// least every one and a half intervals. Of the others, a connection whose
// writer is idle gets its heartbeat written at once without blocking (on
// sockets that allow it); one whose writer is busy, whose socket buffer
// is full or that is not a socket has its writer send the heartbeat
// before its next queued frame. A peer that stops reading still closes
// the connection after StallTimeout.
//
// The goroutine of an interval runs only while a connection with that
// interval beats (is open, and has not stopped its heartbeats). A Heartbeats is safe for concurrent use; the zero
// value is not usable, use NewHeartbeats.
type Heartbeats struct {
	mu     sync.Mutex
	rounds map[time.Duration]*beatRound
}

// NewHeartbeats returns an empty Heartbeats.
func NewHeartbeats() *Heartbeats {
	return &Heartbeats{rounds: map[time.Duration]*beatRound{}}
}

// beatRound is the connections of one interval and the goroutine that
// beats them.
type beatRound struct {
	conns map[*Conn]struct{}
	// empty wakes the goroutine when the last connection left, so that
	// it ends at once rather than at its next tick.
	empty chan struct{}
}

// join adds c; its first heartbeat goes out within one interval.
func (h *Heartbeats) join(c *Conn) {
	every := c.opts.HeartbeatInterval
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rounds[every]
	if r == nil {
		r = &beatRound{conns: map[*Conn]struct{}{}, empty: make(chan struct{}, 1)}
		h.rounds[every] = r
		go h.run(every, r)
	}
	r.conns[c] = struct{}{}
}

// leave removes c (closed, or its heartbeats stopped); a connection that
// left already is left alone.
func (h *Heartbeats) leave(c *Conn) {
	every := c.opts.HeartbeatInterval
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rounds[every]
	if r == nil {
		return
	}
	if _, ok := r.conns[c]; !ok {
		return
	}
	delete(r.conns, c)
	if len(r.conns) == 0 {
		delete(h.rounds, every)
		r.empty <- struct{}{} // buffered: sent once, as the round is gone
	}
}

func (h *Heartbeats) run(every time.Duration, r *beatRound) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var conns []*Conn
	for {
		select {
		case <-r.empty:
			return
		case <-tick.C:
		}
		conns = h.beat(r, conns)
	}
}

// beat sends one round of heartbeats to r's connections; conns is scratch
// space, returned for the next round.
func (h *Heartbeats) beat(r *beatRound, conns []*Conn) []*Conn {
	h.mu.Lock()
	conns = conns[:0]
	for c := range r.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.beat()
	}
	clear(conns) // hold no closed connection until the next round
	return conns[:0]
}

// beat sends one heartbeat: written here when the writer is idle and the
// socket takes it without blocking, handed to the writer otherwise. A
// connection that began a write since half an interval ago needs none:
// the peer's expiry is re-armed by any byte it reads, and it reads one
// from us at least every one and a half intervals (22.5 s at 15 s, half
// the protocol's 45 s expiry).
func (c *Conn) beat() {
	if c.closed.Load() {
		return
	}
	now := time.Since(c.opened)
	if now-time.Duration(c.sentAt.Load()) < c.opts.HeartbeatInterval/2 {
		return
	}
	if c.raw != nil && c.wmu.TryLock() {
		done := false
		if c.beatsOff.Load() {
			c.wmu.Unlock()
			return
		}
		if c.beatRest == nil {
			c.sentAt.Store(int64(now))
			n := c.raw.TryWrite(heartbeatLine)
			switch {
			case n == len(heartbeatLine):
				done = true
			case n > 0: // the writer finishes the line before anything else
				c.beatRest = heartbeatLine[n:]
			}
		}
		c.wmu.Unlock()
		if done {
			return
		}
	}
	c.handedOff.Add(1)
	select {
	case c.beatDue <- struct{}{}:
	default: // already due: one heartbeat is enough
	}
}
