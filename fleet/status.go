package fleet

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/dialer"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// AgentStatus is one agent as the fleet sees it.
type AgentStatus struct {
	Name      string
	Addresses []string
	// Source is static, tailnet, inbound or restored.
	Source string
	// State is the connection machine's state.
	State transport.ConnState
	// Machine, User: who the agent is (whois, or its hello).
	Machine, User string
	Policy        trust.Policy
	Platform      string
	Version       string
	Capabilities  []string
	// MaxWorkers is the agent's capacity (its hello's maxWorkers); 0:
	// no limit, or an agent that does not say.
	MaxWorkers  int
	Addr        string
	ConnectedAt time.Time
	LostAt      time.Time
	LastError   string
	// Dial is the dialer's record of the agent, when it tracks one.
	Dial *dialer.TargetStatus
}

// InstanceStatus is one instance as the fleet sees it.
type InstanceStatus struct {
	InstanceID, Agent, Cwd string
	State                  InstanceState
	Bundle, BundleHash     string
	Model                  *transport.ModelRef
	// ModelPinned: the agent refuses model changes (see PinModel).
	ModelPinned bool
	Degraded    bool
	TraceID     string
	OpenTask    string
	// Activity is what the worker did last (tool name, writing, …).
	Activity   string
	ActivityAt time.Time
	// Cost is the spend seen in the worker's events since the fleet
	// tracks it.
	Cost float64
	// Turns counts the turns of the current (or last) run; Budget bounds
	// each run (nil: unbounded).
	Turns      int
	Budget     *bundle.Budget
	EndReason  string
	PendingUI  []UIRequest
	SessionRef string
	// FromSession is the session the worker started from (a clone of it,
	// or attached to it: SessionMode); StaleBaseline flags a baseline whose
	// repository had moved on at spawn.
	FromSession   string
	SessionMode   string
	StaleBaseline bool
}

// Status is a snapshot of the whole fleet.
type Status struct {
	Agents    []AgentStatus
	Instances []InstanceStatus
	Tasks     []TaskInfo
	// Baselines are the baseline sessions of every agent, stale ones
	// flagged.
	Baselines []SessionView
}

// Status returns the agents, instances and tasks. The dialer's view is
// asked for within ctx. It takes neither the fleet lock nor anything that
// waits for it: the agents are read under dirMu, the instances and tasks
// under the core's lock for reading (which connection changes do not
// hold), so the parts are each consistent but may be a moment apart.
func (f *Fleet) Status(ctx context.Context) Status {
	var dials map[string]dialer.TargetStatus
	f.dirMu.Lock()
	started := f.state == lifeStarted
	f.dirMu.Unlock()
	if started {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		if snap, err := f.dial.Snapshot(sctx); err == nil {
			dials = make(map[string]dialer.TargetStatus, len(snap))
			for _, t := range snap {
				dials[t.ID] = t
			}
		}
		cancel()
	}
	st := Status{Baselines: f.ListSessions(SessionFilter{Kind: session.KindBaseline})}
	f.core.mu.RLock()
	defer f.core.mu.RUnlock()
	var agents []*agentState
	st.Agents, agents = f.agentStatuses(dials)
	var all []*instance
	for _, inst := range f.core.allInstances() {
		all = append(all, inst)
	}
	for _, a := range agents {
		all = slices.AppendSeq(all, maps.Values(a.spawning)) // by their spawn ids; the core's lock guards them
	}
	for _, inst := range all {
		is := InstanceStatus{InstanceID: inst.ref(), Agent: inst.agent, Cwd: inst.rec.Cwd, State: inst.m.State(),
			Bundle: inst.rec.Bundle, BundleHash: inst.rec.BundleHash, Model: modelOf(inst.rec.Model), ModelPinned: inst.rec.ModelPinned, Degraded: inst.rec.Degraded,
			TraceID: inst.rec.TraceID, OpenTask: inst.openTask, Activity: inst.activity, ActivityAt: inst.activityAt,
			Cost: inst.cost, Turns: inst.tally.Turns, Budget: inst.budget, EndReason: inst.rec.EndReason, SessionRef: inst.rec.SessionPath,
			FromSession: inst.rec.FromSession, SessionMode: inst.rec.SessionMode, StaleBaseline: inst.rec.StaleBaseline}
		is.PendingUI = inst.pendingUILocked(f.cfg.Now())
		st.Instances = append(st.Instances, is)
	}
	sortBy(st.Instances, func(i InstanceStatus) string { return i.InstanceID })
	for t := range f.core.allTasks() {
		st.Tasks = append(st.Tasks, infoOf(t.rec))
	}
	sortBy(st.Tasks, func(t TaskInfo) string { return t.TaskID })
	return st
}

// agentStatuses returns every agent's status, sorted by name, and the
// agents. It takes dirMu, which guards all it reads of them (see
// Fleet.dirMu).
func (f *Fleet) agentStatuses(dials map[string]dialer.TargetStatus) ([]AgentStatus, []*agentState) {
	f.dirMu.Lock()
	defer f.dirMu.Unlock()
	out := make([]AgentStatus, 0, len(f.agents))
	agents := make([]*agentState, 0, len(f.agents))
	for _, a := range f.agents {
		as := AgentStatus{Name: a.name, Addresses: slices.Clone(a.addrs), Source: a.source, State: a.m.State(),
			Machine: a.identity.Machine, User: a.identity.User, Policy: a.policy, Addr: a.addr,
			ConnectedAt: a.connectedAt, LostAt: a.lostAt, LastError: a.lastErr}
		if h := a.hello; h != nil {
			as.Platform, as.Version, as.Capabilities = h.Platform, h.PackageVersion, slices.Clone(h.Capabilities)
			if h.MaxWorkers != nil && *h.MaxWorkers >= 1 {
				as.MaxWorkers = int(*h.MaxWorkers)
			}
		}
		if d, ok := dials[a.name]; ok {
			as.Dial = &d
		}
		out = append(out, as)
		agents = append(agents, a)
	}
	sortBy(out, func(a AgentStatus) string { return a.Name })
	return out, agents
}

func sortBy[T any](s []T, key func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return strings.Compare(key(a), key(b)) })
}

func modelOf(m *serverstore.ModelRef) *transport.ModelRef {
	if m == nil {
		return nil
	}
	return &transport.ModelRef{Provider: m.Provider, ID: m.ID, Thinking: m.Thinking}
}
