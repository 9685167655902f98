package fleet

import (
	"cmp"
	"slices"
	"sync"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/session"
)

// sessionSet is the fleet's session data: each agent's session
// projection (the registry of its sessions, with the server's fields on
// top) and the HEADs last seen of baselines' repositories.
//
// Its lock guards the two maps, and is held while a projection is encoded
// and its write queued on the state store, so that the store gets one
// agent's snapshots in the order they were taken and the last one written
// is the newest. The projections are safe for concurrent use by
// themselves: they are changed without the lock once looked up.
//
// It may be taken with Fleet.mu held, and takes no other lock but the
// state store's write queue (Queue, which never waits for the disk).
type sessionSet struct {
	store *serverstore.Store
	log   zerolog.Logger

	mu    sync.Mutex
	projs map[string]*session.Projection // by agent name
	heads map[string]string              // by machine and cwd (headKey)
}

func newSessionSet(store *serverstore.Store, log zerolog.Logger) *sessionSet {
	return &sessionSet{store: store, log: log, projs: map[string]*session.Projection{}, heads: map[string]string{}}
}

// agentProjection is one agent's projection, as sessionSet.list returns it.
type agentProjection struct {
	agent string
	p     *session.Projection
}

// projection returns agent's projection, empty (and kept) on first use.
func (ss *sessionSet) projection(agent string) *session.Projection {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.projectionLocked(agent)
}

// lookup returns agent's projection; nil when it has none.
func (ss *sessionSet) lookup(agent string) *session.Projection {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.projs[agent]
}

// restore keeps p, read from the store, as agent's projection.
func (ss *sessionSet) restore(agent string, p *session.Projection) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.projs[agent] = p
}

// list returns the projections of every agent that has one (agent only,
// when not empty), sorted by agent name.
func (ss *sessionSet) list(agent string) []agentProjection {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if agent != "" {
		if p := ss.projs[agent]; p != nil {
			return []agentProjection{{agent, p}}
		}
		return nil
	}
	out := make([]agentProjection, 0, len(ss.projs))
	for name, p := range ss.projs {
		out = append(out, agentProjection{name, p})
	}
	slices.SortFunc(out, func(a, b agentProjection) int { return cmp.Compare(a.agent, b.agent) })
	return out
}

// setHead remembers the HEAD seen of the repository in cwd on machine.
func (ss *sessionSet) setHead(machine, cwd, head string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.heads[headKey(machine, cwd)] = head
}

// head returns the HEAD last seen of the repository in cwd on machine; ""
// when never checked.
func (ss *sessionSet) head(machine, cwd string) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.heads[headKey(machine, cwd)]
}

// persist queues the write of agent's projection (created empty when it
// has none) on the store; it is committed outside every fleet lock, in the
// order queued, and a failure is logged.
func (ss *sessionSet) persist(agent string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.persistLocked(agent, ss.projectionLocked(agent))
}

// persistAll queues the write of every agent's projection.
func (ss *sessionSet) persistAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for agent, p := range ss.projs {
		ss.persistLocked(agent, p)
	}
}

func (ss *sessionSet) projectionLocked(agent string) *session.Projection {
	p := ss.projs[agent]
	if p == nil {
		p = session.NewProjection()
		ss.projs[agent] = p
	}
	return p
}

func (ss *sessionSet) persistLocked(agent string, p *session.Projection) {
	raw, err := p.MarshalJSON()
	if err != nil {
		ss.log.Warn().Err(err).Str("agent", agent).Msg("persist session projection")
		return
	}
	ss.store.Queue(func(tx *serverstore.Tx) error { return tx.PutProjection(agent, raw) }, func(err error) {
		if err != nil {
			ss.log.Warn().Err(err).Str("agent", agent).Msg("persist session projection")
		}
	})
}
