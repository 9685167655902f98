package agent

import (
	"time"

	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/fleet/internal/streamdelta"
)

// How the agent gathers a worker's streamed updates for a server that
// reads event_delta: an update waits at most coalesceWindow for the ones
// after it, and a frame holds at most batchEntries updates or about
// batchBytes of them. A worker that streams slower than one chunk per
// window gets a frame per chunk; one that streams faster shares each
// frame's own bytes (about 95 of them, six times a 16-character chunk's
// entry) among many chunks. 10 ms is below what a reader of streamed
// text notices, and with 2 ms a worker slowed down by a busy machine got
// a frame per one or two chunks (4.7 times the answer's size on the
// wire instead of 3).
const (
	coalesceWindow = 10 * time.Millisecond
	batchEntries   = 1024
	batchBytes     = 128 << 10
)

// streamer forwards one worker's events to the connected servers, on the
// instance's pump goroutine: whole to a server that does not read
// event_delta (a TypeScript one), coded and batched to one that does.
type streamer struct {
	in    *instance
	enc   streamdelta.Encoder
	coded streamdelta.Coded // the event forward encodes
	peers map[*peer]*peerStream
	timer *time.Timer
	armed bool // the timer runs: some batch holds updates
}

// peerStream is what one connection received of the worker's stream.
type peerStream struct {
	chain streamdelta.Chain
	batch *streamdelta.Batch
}

func newStreamer(in *instance) *streamer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &streamer{in: in, peers: map[*peer]*peerStream{}, timer: t}
}

// next waits for the worker's next event, sending what waits in the
// batches when the window closes first.
func (s *streamer) next(events <-chan worker.Event) (worker.Event, bool) {
	for s.armed {
		select {
		case ev, ok := <-events:
			return ev, ok
		case <-s.timer.C:
			s.armed = false
			s.flush()
		}
	}
	ev, ok := <-events
	return ev, ok
}

// forward sends ev to every connected server. Anything but an update
// first sends the batches, so that every server gets the worker's events
// in order.
func (s *streamer) forward(ev worker.Event) {
	if ev.Raw == nil || !streamdelta.Carries(ev.Kind, true) {
		s.flush()
		if ev.Raw != nil {
			s.in.a.broadcast(eventFrame(s.in.id, ev), false)
		}
		return
	}
	peers := s.in.a.peersSnapshot()
	// Encoded once, for the peers that read the codec, into s.coded: a
	// variable of the loop would be moved to the heap, an allocation per
	// event.
	var coded *streamdelta.Coded
	for _, p := range peers {
		if !s.deltas(p) || !streamdelta.Carries(ev.Kind, p.refs.Load()) {
			if ps := s.peers[p]; ps != nil {
				s.send(p, ps) // what waits goes first
			}
			_ = s.in.a.offer(p, eventFrame(s.in.id, ev))
			continue
		}
		if coded == nil {
			s.coded = s.enc.Encode(ev.Seq, ev.Raw)
			coded = &s.coded
		}
		ps := s.peers[p]
		if ps == nil {
			ps = &peerStream{batch: streamdelta.NewBatch(s.in.id)}
			if p.coalesce.Load() {
				ps.batch = streamdelta.NewCoalescingBatch(s.in.id)
			}
			s.peers[p] = ps
		}
		// A whole event might not fit in the frame with what waits.
		if !ps.batch.Fits(ev.Seq) || !ps.chain.Codes(coded) && ps.batch.Size()+len(ev.Raw) > batchBytes {
			s.send(p, ps)
		}
		ps.batch.Add(&ps.chain, coded)
		if ps.batch.Len() >= batchEntries || ps.batch.Size() >= batchBytes || !streamdelta.Waits(ev.Kind) {
			s.send(p, ps)
		} else if !s.armed {
			s.timer.Reset(coalesceWindow)
			s.armed = true
		}
	}
	if coded == nil {
		// Nobody reads the codec: it starts again from a whole update
		// when somebody does.
		s.enc.Reset()
	}
	if len(s.peers) > len(peers) {
		s.forget(peers)
	}
}

// deltas reports whether p gets event_delta frames.
func (s *streamer) deltas(p *peer) bool { return p.delta.Load() && !s.in.a.cfg.NoEventDelta }

// flush sends every batch that holds updates.
func (s *streamer) flush() {
	if s.armed {
		s.timer.Stop()
		s.armed = false
	}
	for p, ps := range s.peers {
		s.send(p, ps)
	}
}

func (s *streamer) send(p *peer, ps *peerStream) {
	if f := ps.batch.Frame(); f != nil {
		if s.in.a.offer(p, f) != nil {
			// Not taken: the connection is going, and the chain with it.
			ps.chain.Reset()
		}
	}
}

// forget drops the state of connections that are gone.
func (s *streamer) forget(live []*peer) {
	keep := make(map[*peer]bool, len(live))
	for _, p := range live {
		keep[p] = true
	}
	for p := range s.peers {
		if !keep[p] {
			delete(s.peers, p)
		}
	}
}
