package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"example.com/pifleet/session"
	"example.com/pifleet/transport"
)

// reportPageBytes bounds the sessions of one sessions_report frame, well
// under transport.MaxFrameBytes.
const reportPageBytes = 900 << 10

// reportPageSessions is the most sessions in one sessions_report: the
// TypeScript agent's cap on its single report (reference 1.18).
const reportPageSessions = 200

// rescanGap is the least time between two polls asked by the agent's own
// workers (rescanSessions).
const rescanGap = 200 * time.Millisecond

// entriesPageBytes bounds the entries of one session_entries_result.
const entriesPageBytes = 900 << 10

func wireSession(s session.SessionInfo) transport.SessionInfo {
	return transport.SessionInfo{SessionID: s.SessionID, Path: s.Path, Name: s.Name, Cwd: s.Cwd,
		Kind: transport.SessionKind(s.Kind), Pinned: s.Pinned, ParentSession: s.ParentSession,
		UpdatedAt: float64(s.UpdatedAt)}
}

func wireSessions(in []session.SessionInfo) []transport.SessionInfo {
	out := make([]transport.SessionInfo, len(in))
	for i, s := range in {
		out[i] = wireSession(s)
	}
	return out
}

// sendFullReport sends every session to a new connection: one
// sessions_report {full:true}, or, when the listing does not fit one frame,
// numbered pages of it (to a pifleet server; a TypeScript one gets the
// first page, as from the TypeScript agent).
func (a *Agent) sendFullReport(ctx context.Context, p *peer) {
	l, err := a.lister.List(ctx)
	if err != nil {
		a.log.Warn().Err(err).Msg("sessions listing")
		return
	}
	a.sendReport(ctx, p, wireSessions(l.Sessions), true)
}

func (a *Agent) sendReport(ctx context.Context, p *peer, sessions []transport.SessionInfo, full bool) {
	pages, err := session.Paginate(sessions, session.PageLimits{MaxItems: reportPageSessions, MaxBytes: reportPageBytes})
	if err != nil {
		a.log.Warn().Err(err).Msg("sessions report")
		return
	}
	for i, page := range pages {
		f := &transport.SessionsReportFrame{Machine: a.cfg.Machine, Full: full, Sessions: page}
		if full && len(pages) > 1 {
			// A TypeScript server keeps only the latest report: it gets
			// the first page, the newest sessions, as the TS agent sends
			// them. A pifleet server assembles the numbered pages.
			if i > 0 && (p == nil || !p.pifleet.Load()) {
				return
			}
			if p != nil && p.pifleet.Load() {
				f.Page, f.Pages = new(float64(i)), new(float64(len(pages)))
			}
		}
		if p != nil {
			if p.conn.Send(ctx, f) != nil {
				return
			}
		} else {
			a.broadcast(f, true)
		}
	}
}

// reportLoop polls the session files and sends what changed to pifleet
// servers: sessions_report {full:false} for new and changed sessions,
// sessions_removed for the files gone (AC-3.5.4). It polls every
// SessionsPoll (never when negative) and at once when one of the agent's
// own workers changed its session (rescanSessions).
func (a *Agent) reportLoop(ctx context.Context) {
	if _, err := a.watcher.Full(ctx); err != nil {
		a.log.Warn().Err(err).Msg("sessions watcher")
	}
	var tick <-chan time.Time
	if a.cfg.SessionsPoll > 0 {
		t := time.NewTicker(a.cfg.SessionsPoll)
		defer t.Stop()
		tick = t.C
	}
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-a.rescan:
			// A poll walks every session file: workers settling in a burst
			// share one, at most every rescanGap.
			if wait := rescanGap - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			select { // what asked meanwhile is served by this poll
			case <-a.rescan:
			default:
			}
		}
		last = time.Now()
		d, err := a.watcher.Poll(ctx)
		if err != nil || d.Empty() {
			continue
		}
		changed := append(wireSessions(d.Added), wireSessions(d.Updated)...)
		if len(changed) > 0 {
			a.sendReport(ctx, nil, changed, false)
		}
		if len(d.Removed) > 0 {
			paths := make([]string, len(d.Removed))
			for i, s := range d.Removed {
				paths[i] = s.Path
			}
			a.broadcast(&transport.SessionsRemovedFrame{Machine: a.cfg.Machine, Paths: paths}, true)
		}
	}
}

// rescanSessions asks the reporter to poll now; requests made while one
// is pending are merged.
func (a *Agent) rescanSessions() {
	select {
	case a.rescan <- struct{}{}:
	default:
	}
}

// search answers session_search (reference 1.18).
func (a *Agent) search(ctx context.Context, f *transport.SessionSearchFrame) transport.Frame {
	res, err := a.lister.Search(ctx, f.Query, session.SearchOptions{Cwd: f.Cwd})
	if err != nil && len(res.Hits) == 0 {
		return errorFrame(f, CodeInternal, err.Error())
	}
	out := &transport.SessionHitsFrame{Hits: make([]transport.SessionHit, len(res.Hits))}
	for i, h := range res.Hits {
		out.Hits[i] = transport.SessionHit{SessionID: h.SessionID, Path: h.Path, Snippet: h.Snippet}
	}
	out.ID = f.ID
	return out
}

// sessionEntries answers session_entries: the entries after an entry id,
// read from the file (pi 0.73.1 has no get_entries).
func (a *Agent) sessionEntries(f *transport.SessionEntriesFrame) transport.Frame {
	fail := func(path, code, msg string) transport.Frame {
		out := &transport.SessionEntriesResultFrame{Path: path, After: f.After, Entries: []byte("[]"),
			Error: &transport.FsError{Code: code, Message: msg}}
		out.ID = f.ID
		return out
	}
	path := f.Path
	if f.InstanceID != "" {
		in := a.lookup(f.InstanceID)
		if in == nil {
			return fail(path, CodeUnknownInstance, "no instance "+f.InstanceID)
		}
		in.mu.Lock()
		path = in.sessionPath
		in.mu.Unlock()
		if path == "" {
			return fail(path, "not_found", "instance "+f.InstanceID+" has no session file")
		}
	} else if !a.underSessionsRoot(path) {
		return fail(path, "path_escape", "path is not a session file under the agent's sessions root")
	}
	limit := 0
	if f.Limit != nil && *f.Limit > 0 {
		limit = int(*f.Limit)
	}
	// Resume where the last answer for this file ended when it ended at
	// f.After: a catch-up after every settle must not rescan the file for
	// the id (Cursor.Next checks that the entry is still there).
	cur := session.Cursor{Path: path, EntryID: f.After}
	if c, ok := a.entryCursor(path); ok && f.After != "" && c.EntryID == f.After {
		cur = c
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	last, lastCur, more, n := f.After, cur, false, 0
read:
	for {
		want := entriesChunk
		if limit > 0 {
			if want = min(want, limit-n); want == 0 {
				more = true // maybe: the client asks again and gets none
				break
			}
		}
		entries, pos, err := cur.Next(want)
		if err != nil && n == 0 && len(entries) == 0 {
			switch {
			case errors.Is(err, session.ErrUnknownEntry):
				return fail(path, "unknown_entry", err.Error())
			default:
				return fail(path, "not_found", err.Error())
			}
		}
		for _, e := range entries {
			if buf.Len()+len(e.Raw)+2 > entriesPageBytes {
				if n == 0 {
					return fail(path, "entry_too_large", fmt.Sprintf("entry %s is %d bytes: more than one frame holds", e.ID, len(e.Raw)))
				}
				more = true
				break read
			}
			if n > 0 {
				buf.WriteByte(',')
			}
			buf.Write(e.Raw)
			n++
			last = e.ID
			lastCur = session.Cursor{Path: path, SessionID: pos.SessionID, EntryID: e.ID, Line: e.Line, Offset: e.Offset, End: e.End}
		}
		if err != nil || len(entries) < want {
			break // the end of the complete lines (or a corrupt one: sent up to it)
		}
		cur = pos
	}
	buf.WriteByte(']')
	if n > 0 {
		a.rememberEntryCursor(lastCur)
	}
	out := &transport.SessionEntriesResultFrame{Path: path, After: f.After, Entries: buf.Bytes(), LastEntryID: last, More: more}
	out.ID = f.ID
	return out
}

// entriesChunk is how many entries session_entries reads at a time.
const entriesChunk = 64

// maxEntryCursors bounds the cursors kept for session_entries.
const maxEntryCursors = 256

func (a *Agent) entryCursor(path string) (session.Cursor, bool) {
	a.cursorMu.Lock()
	defer a.cursorMu.Unlock()
	c, ok := a.cursors[path]
	return c, ok
}

func (a *Agent) rememberEntryCursor(c session.Cursor) {
	a.cursorMu.Lock()
	defer a.cursorMu.Unlock()
	if a.cursors == nil {
		a.cursors = map[string]session.Cursor{}
	}
	if _, ok := a.cursors[c.Path]; !ok && len(a.cursors) >= maxEntryCursors {
		for p := range a.cursors { // any one: a forgotten cursor only costs a rescan
			delete(a.cursors, p)
			break
		}
	}
	a.cursors[c.Path] = c
}

func (a *Agent) underSessionsRoot(path string) bool {
	if path == "" || !filepath.IsAbs(path) || !strings.HasSuffix(path, ".jsonl") {
		return false
	}
	root, err := filepath.EvalSymlinks(a.cfg.SessionsRoot)
	if err != nil {
		return false
	}
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..")
}

// eventsSince replays a worker's buffered events after a seq to the asking
// connection, then closes the answer with events_replayed (seed §6).
func (a *Agent) eventsSince(ctx context.Context, p *peer, f *transport.EventsSinceFrame) {
	in := a.lookup(f.InstanceID)
	if in == nil || in.worker() == nil {
		p.reply(ctx, errorFrame(f, CodeUnknownInstance, "no instance "+f.InstanceID))
		return
	}
	since := uint64(max(f.Since, 0))
	events, first, gap := in.worker().Since(since)
	var missed uint64
	if gap && first > since+1 {
		missed = first - since - 1
	}
	last := in.lastSeq.Load()
	n := 0
	for _, ev := range events {
		if ev.Raw == nil {
			continue
		}
		if p.conn.Send(ctx, eventFrame(in.id, ev)) != nil {
			return
		}
		n++
	}
	out := &transport.EventsReplayedFrame{InstanceID: in.id, Since: f.Since, Count: float64(n),
		LastSeq: float64(last), Missed: float64(missed)}
	out.ID = f.ID
	p.reply(ctx, out)
}
