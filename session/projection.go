package session

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"example.com/pifleet/internal/fsmkit"
)

// ServerFields are what the server knows of a session and the agent does
// not: they are never taken from a report, and they are kept across reports
// for as long as the session exists.
type ServerFields struct {
	Bundle             string   `json:"bundle,omitempty"`
	BundleHash         string   `json:"bundleHash,omitempty"`
	GitHead            string   `json:"gitHead,omitempty"`
	TaskIDs            []string `json:"taskIds,omitempty"`
	Labels             []string `json:"labels,omitempty"`
	AttachedInstanceID string   `json:"attachedInstanceId,omitempty"`
	// PinnedByServer pins a session that is not a baseline.
	PinnedByServer bool `json:"pinnedByServer,omitempty"`
	// LastEntryID is the last entry the server has seen (catch-up cursor).
	LastEntryID string `json:"lastEntryId,omitempty"`
}

func (f ServerFields) clone() ServerFields {
	f.TaskIDs = slices.Clone(f.TaskIDs)
	f.Labels = slices.Clone(f.Labels)
	return f
}

// Record is the server's entry for one session file: the agent's fields as
// last reported, the machine, and the server's own fields.
type Record struct {
	SessionID     string `json:"sessionId"`
	Path          string `json:"path"`
	Name          string `json:"name,omitempty"`
	Machine       string `json:"machine"`
	Cwd           string `json:"cwd"`
	Kind          Kind   `json:"kind"`
	Pinned        bool   `json:"pinned"` // as the agent reported it (baselines)
	ParentSession string `json:"parentSession,omitempty"`
	UpdatedAt     Millis `json:"updatedAt"`
	ServerFields
}

// Info returns the record as a wire SessionInfo; it is pinned when the agent
// or the server pinned it.
func (r Record) Info() SessionInfo {
	f := r.ServerFields.clone()
	return SessionInfo{
		SessionID: r.SessionID, Path: r.Path, Name: r.Name, Cwd: r.Cwd, Kind: r.Kind,
		Pinned: r.Pinned || f.PinnedByServer, ParentSession: r.ParentSession,
		Bundle: f.Bundle, BundleHash: f.BundleHash, GitHead: f.GitHead, TaskIDs: f.TaskIDs,
		Labels: f.Labels, UpdatedAt: r.UpdatedAt, AttachedInstanceID: f.AttachedInstanceID,
	}
}

func (r Record) clone() Record {
	r.ServerFields = r.ServerFields.clone()
	return r
}

// sameAgentFields compares what a report sets.
func (r Record) sameAgentFields(o Record) bool {
	return r.SessionID == o.SessionID && r.Path == o.Path && r.Name == o.Name && r.Cwd == o.Cwd &&
		r.Kind == o.Kind && r.Pinned == o.Pinned && r.ParentSession == o.ParentSession && r.UpdatedAt == o.UpdatedAt
}

// Report is a sessions_report as the projection applies it.
type Report struct {
	Machine string
	// Full: Sessions is the agent's whole inventory (or one page of it).
	// Otherwise Sessions are added or updated sessions and Removed lists
	// the paths of removed ones.
	Full     bool
	Sessions []SessionInfo
	Removed  []string
	// Page and Pages number the pages of a paged full report (Page from
	// 0 to Pages-1, in order); Pages 0 or 1 is a report in one piece.
	Page, Pages int
}

// Changes says what a report changed, for the server to act on.
type Changes struct {
	Added, Updated, Removed []Record
}

// Projection is the server's registry of the sessions of every agent, kept
// equal to what the agents report: a full report replaces a
// machine's sessions exactly (no ghosts, none missing) while keeping the
// server's own fields of every session that still exists; incremental
// reports add, update and remove; a lost connection marks the machine's
// projection stale. Each machine's reconciliation follows RegistryTable;
// an input its state does not accept (an incremental report before the
// full one, say) is refused with a *fsmkit.StaleEventError and changes
// nothing.
//
// A Projection is safe for concurrent use. It encodes to JSON (sessions and
// pending server fields, not the states: a loaded projection is stale until
// each agent reports again).
type Projection struct {
	mu       sync.Mutex
	machines map[string]*machineView
}

type machineView struct {
	fsm      fsmkit.Machine[RegistryState, RegistryEvent]
	sessions map[string]Record // by path
	// pending holds server fields for sessions not reported yet (a clone
	// whose file pi creates only with the first assistant message).
	pending map[string]ServerFields
	// the full report being assembled
	pages    []SessionInfo
	nextPage int
	numPages int
}

// NewProjection returns an empty projection.
func NewProjection() *Projection {
	return &Projection{machines: map[string]*machineView{}}
}

func (p *Projection) view(machine string) *machineView {
	v := p.machines[machine]
	if v == nil {
		v = &machineView{fsm: RegistryTable.Start(), sessions: map[string]Record{}, pending: map[string]ServerFields{}}
		p.machines[machine] = v
	}
	return v
}

// Connected records that the server (re)connected to machine: its
// projection is stale until the agent's full report is applied.
func (p *Projection) Connected(machine string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.view(machine).markStale()
}

// ConnectionLost marks machine's projection stale and drops any full report
// half received. Its sessions are kept (stale) until the next full report.
func (p *Projection) ConnectionLost(machine string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v := p.machines[machine]; v != nil {
		v.markStale()
	}
}

func (v *machineView) markStale() {
	if v.fsm.State() != StateStaleProjection {
		// Valid from every other state (see RegistryTable).
		_ = v.fsm.Fire(EventConnectionLost)
	}
	v.resetPages()
}

func (v *machineView) resetPages() {
	v.pages, v.nextPage, v.numPages = nil, 0, 0
}

// State returns machine's reconciliation state; ok is false for a machine
// the projection has never heard of.
func (p *Projection) State(machine string) (s RegistryState, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.machines[machine]
	if v == nil {
		return "", false
	}
	return v.fsm.State(), true
}

// ApplyReport applies a sessions report. A full report (or its last page)
// makes the machine synced; until then nothing changes. An inconsistent full
// report is rejected (the machine goes back to stale) with ErrInvalidReport;
// an inconsistent incremental report is refused whole. A report the
// machine's state does not accept returns a *fsmkit.StaleEventError.
func (p *Projection) ApplyReport(r Report) (Changes, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Machine == "" {
		return Changes{}, fmt.Errorf("%w: no machine", ErrInvalidReport)
	}
	v := p.view(r.Machine)
	if r.Full {
		return v.applyFull(r)
	}
	return v.applyIncremental(r)
}

func (v *machineView) applyFull(r Report) (Changes, error) {
	pages := max(r.Pages, 1)
	if r.Page == 0 {
		if err := v.fsm.Fire(EventReportReceived); err != nil {
			return Changes{}, err
		}
		v.resetPages()
		v.numPages = pages
	} else {
		if v.fsm.State() != StateReconciling {
			return Changes{}, v.fsm.Fire(EventPageReceived) // stale: says why
		}
		if r.Page != v.nextPage || pages != v.numPages {
			return Changes{}, v.reject(fmt.Errorf("%w: page %d of %d, expected page %d of %d", ErrInvalidReport, r.Page, pages, v.nextPage, v.numPages))
		}
		if err := v.fsm.Fire(EventPageReceived); err != nil {
			return Changes{}, err
		}
	}
	v.pages = append(v.pages, r.Sessions...)
	v.nextPage++
	if v.nextPage < v.numPages {
		return Changes{}, nil
	}
	if err := validate(v.pages, nil); err != nil {
		return Changes{}, v.reject(err)
	}
	ch := v.replace(r.Machine, v.pages)
	v.resetPages()
	if err := v.fsm.Fire(EventReconciled); err != nil {
		return Changes{}, err
	}
	return ch, nil
}

func (v *machineView) reject(err error) error {
	_ = v.fsm.Fire(EventReportRejected) // valid: we are reconciling
	v.resetPages()
	return err
}

// replace makes the machine's sessions exactly the reported ones.
func (v *machineView) replace(machine string, reported []SessionInfo) Changes {
	ch := Changes{Added: []Record{}, Updated: []Record{}, Removed: []Record{}}
	next := make(map[string]Record, len(reported))
	for _, s := range reported {
		rec := v.upsert(machine, s, &ch)
		next[rec.Path] = rec
	}
	for path, old := range v.sessions {
		if _, ok := next[path]; !ok {
			ch.Removed = append(ch.Removed, old.clone())
		}
	}
	v.sessions = next
	ch.sort()
	return ch
}

// upsert builds the record for a reported session, keeping the server
// fields of the same session (same path and id) or taking pending ones.
func (v *machineView) upsert(machine string, s SessionInfo, ch *Changes) Record {
	rec := recordFrom(machine, s)
	old, ok := v.sessions[s.Path]
	switch {
	case ok && old.SessionID == s.SessionID:
		rec.ServerFields = old.ServerFields
		if !rec.sameAgentFields(old) {
			ch.Updated = append(ch.Updated, rec.clone())
		}
		return rec
	case ok:
		// Another session now lives at this path: the old one is gone
		// with its server fields.
		ch.Removed = append(ch.Removed, old.clone())
	}
	if f, ok := v.pending[s.Path]; ok {
		rec.ServerFields = f
		delete(v.pending, s.Path)
	}
	ch.Added = append(ch.Added, rec.clone())
	return rec
}

func recordFrom(machine string, s SessionInfo) Record {
	kind := s.Kind
	if kind == "" {
		kind = KindOf(s.Name)
	}
	return Record{
		SessionID: s.SessionID, Path: s.Path, Name: s.Name, Machine: machine, Cwd: s.Cwd,
		Kind: kind, Pinned: s.Pinned, ParentSession: s.ParentSession, UpdatedAt: s.UpdatedAt,
	}
}

func (v *machineView) applyIncremental(r Report) (Changes, error) {
	if !v.fsm.Can(EventIncrementalReport) {
		return Changes{}, v.fsm.Fire(EventIncrementalReport) // stale: says why
	}
	if err := validate(r.Sessions, r.Removed); err != nil {
		return Changes{}, err
	}
	if err := v.fsm.Fire(EventIncrementalReport); err != nil {
		return Changes{}, err
	}
	ch := Changes{Added: []Record{}, Updated: []Record{}, Removed: []Record{}}
	for _, s := range r.Sessions {
		v.sessions[s.Path] = v.upsert(r.Machine, s, &ch)
	}
	for _, path := range r.Removed {
		if old, ok := v.sessions[path]; ok {
			ch.Removed = append(ch.Removed, old.clone())
			delete(v.sessions, path)
		}
	}
	ch.sort()
	return ch, nil
}

// validate checks the sessions of a report: each has a path and an id and a
// known (or empty) kind, no path twice, no path both upserted and removed.
func validate(sessions []SessionInfo, removed []string) error {
	seen := make(map[string]bool, len(sessions))
	for i, s := range sessions {
		switch {
		case s.Path == "":
			return fmt.Errorf("%w: session %d has no path", ErrInvalidReport, i)
		case s.SessionID == "":
			return fmt.Errorf("%w: session %s has no id", ErrInvalidReport, s.Path)
		case s.Kind != "" && !s.Kind.Valid():
			return fmt.Errorf("%w: session %s has kind %q", ErrInvalidReport, s.Path, s.Kind)
		case seen[s.Path]:
			return fmt.Errorf("%w: session %s reported twice", ErrInvalidReport, s.Path)
		}
		seen[s.Path] = true
	}
	for _, path := range removed {
		if seen[path] {
			return fmt.Errorf("%w: session %s both reported and removed", ErrInvalidReport, path)
		}
	}
	return nil
}

func (c *Changes) sort() {
	for _, l := range [][]Record{c.Added, c.Updated, c.Removed} {
		slices.SortFunc(l, func(a, b Record) int { return cmp.Compare(a.Path, b.Path) })
	}
}

// BeginCatchUp records that the server reattached to a live session on
// machine and is reading the entries it missed. Only a synced machine can;
// otherwise it returns a *fsmkit.StaleEventError. One catch-up at a time
// per machine: the driver serialises them.
func (p *Projection) BeginCatchUp(machine string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.view(machine).fsm.Fire(EventReattach)
}

// CaughtUp ends a catch-up: the entries after the session's last seen
// entry were applied, up to lastEntryID, which is stored in the session's
// record (when the session is known).
func (p *Projection) CaughtUp(machine, path, lastEntryID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.view(machine)
	if err := v.fsm.Fire(EventCaughtUp); err != nil {
		return err
	}
	if rec, ok := v.sessions[path]; ok && lastEntryID != "" {
		rec.LastEntryID = lastEntryID
		v.sessions[path] = rec
	}
	return nil
}

// Annotate changes the server fields of the session at path on machine. For
// a session not reported yet, the fields wait and are applied when it
// appears (a fresh clone's file is written only with its first answer).
// edit runs under the projection's lock and must not call it.
func (p *Projection) Annotate(machine, path string, edit func(*ServerFields)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.view(machine)
	if rec, ok := v.sessions[path]; ok {
		edit(&rec.ServerFields)
		v.sessions[path] = rec
		return
	}
	f := v.pending[path]
	edit(&f)
	v.pending[path] = f
}

// Forget drops machine and everything known about it.
func (p *Projection) Forget(machine string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.machines, machine)
}

// Get returns the record of the session at path on machine.
func (p *Projection) Get(machine, path string) (Record, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.machines[machine]
	if v == nil {
		return Record{}, false
	}
	rec, ok := v.sessions[path]
	return rec.clone(), ok
}

// Sessions returns machine's sessions, newest first.
func (p *Projection) Sessions(machine string) []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []Record{}
	if v := p.machines[machine]; v != nil {
		for _, rec := range v.sessions {
			out = append(out, rec.clone())
		}
	}
	sortRecords(out)
	return out
}

// All returns every machine's sessions, newest first.
func (p *Projection) All() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []Record{}
	for _, v := range p.machines {
		for _, rec := range v.sessions {
			out = append(out, rec.clone())
		}
	}
	sortRecords(out)
	return out
}

// FindByName returns the sessions named name on any machine, newest first
// (how "fromSession": "baseline:api" is resolved).
func (p *Projection) FindByName(name string) []Record {
	out := []Record{}
	for _, rec := range p.All() {
		if rec.Name == name {
			out = append(out, rec)
		}
	}
	return out
}

// Lineage returns the session at path and its ancestors on the same
// machine, following parentSession (a task clone, then its baseline, …). It
// stops at a parent the projection does not hold.
func (p *Projection) Lineage(machine, path string) []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []Record{}
	v := p.machines[machine]
	if v == nil {
		return out
	}
	seen := map[string]bool{}
	for path != "" && !seen[path] {
		rec, ok := v.sessions[path]
		if !ok {
			break
		}
		seen[path] = true
		out = append(out, rec.clone())
		path = rec.ParentSession
	}
	return out
}

func sortRecords(recs []Record) {
	slices.SortFunc(recs, func(a, b Record) int {
		if c := cmp.Compare(b.UpdatedAt, a.UpdatedAt); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Machine, b.Machine); c != 0 {
			return c
		}
		return cmp.Compare(a.Path, b.Path)
	})
}

type projectionJSON struct {
	Machines map[string]machineJSON `json:"machines"`
}

type machineJSON struct {
	Sessions []Record                `json:"sessions"`
	Pending  map[string]ServerFields `json:"pending,omitempty"`
}

// MarshalJSON encodes every machine's sessions and pending server fields.
func (p *Projection) MarshalJSON() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := projectionJSON{Machines: map[string]machineJSON{}}
	for name, v := range p.machines {
		m := machineJSON{Sessions: []Record{}, Pending: maps.Clone(v.pending)}
		for _, rec := range v.sessions {
			m.Sessions = append(m.Sessions, rec)
		}
		slices.SortFunc(m.Sessions, func(a, b Record) int { return cmp.Compare(a.Path, b.Path) })
		out.Machines[name] = m
	}
	return json.Marshal(out)
}

// UnmarshalJSON replaces the projection with an encoded one. Every machine
// starts stale: what was saved is kept but not trusted until its agent
// reports again.
func (p *Projection) UnmarshalJSON(b []byte) error {
	var in projectionJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("session: decoding projection: %w", err)
	}
	machines := map[string]*machineView{}
	for name, m := range in.Machines {
		v := &machineView{fsm: RegistryTable.Start(), sessions: map[string]Record{}, pending: map[string]ServerFields{}}
		for _, rec := range m.Sessions {
			if rec.Path == "" {
				return fmt.Errorf("session: decoding projection: machine %s has a session without path", name)
			}
			rec.Machine = name
			v.sessions[rec.Path] = rec
		}
		maps.Copy(v.pending, m.Pending)
		machines[name] = v
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.machines = machines
	return nil
}
