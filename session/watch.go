package session

import (
	"context"
	"time"
)

// Diff is what changed under a sessions root between two listings, the
// content of an incremental sessions_report. Poll returns non-nil slices, so
// they encode as [] (the TypeScript schema rejects null).
type Diff struct {
	Added   []SessionInfo // new files
	Updated []SessionInfo // files whose SessionInfo changed (appended to, renamed, …)
	Removed []SessionInfo // files gone, as last seen
}

// Empty reports whether nothing changed.
func (d Diff) Empty() bool {
	return len(d.Added) == 0 && len(d.Updated) == 0 && len(d.Removed) == 0
}

// Watcher detects created, changed and removed session files by polling a
// Lister: each poll is a re-list, which the Lister's cache makes one stat
// per unchanged file. Polling needs no dependency and works on every file
// system (fsnotify is not used); a change is seen within one interval.
//
// A Watcher is owned by one goroutine (Full, Poll and Run must not run
// concurrently).
type Watcher struct {
	lister *Lister
	known  map[string]SessionInfo
}

// NewWatcher returns a watcher over l. Until Full or Poll runs, it knows no
// sessions, so the first Poll reports every session as added.
func NewWatcher(l *Lister) *Watcher {
	return &Watcher{lister: l, known: map[string]SessionInfo{}}
}

// Full lists every session and makes that listing the baseline for the next
// Poll: the content of a full sessions_report.
func (w *Watcher) Full(ctx context.Context) (Listing, error) {
	l, err := w.lister.List(ctx)
	if err != nil {
		return Listing{}, err
	}
	w.known = make(map[string]SessionInfo, len(l.Sessions))
	for _, s := range l.Sessions {
		w.known[s.Path] = s
	}
	return l, nil
}

// Poll lists again and returns what changed since the last Full or Poll.
// Each list of the Diff is in listing order (newest first); Removed is
// sorted by path.
func (w *Watcher) Poll(ctx context.Context) (Diff, error) {
	l, err := w.lister.List(ctx)
	if err != nil {
		return Diff{}, err
	}
	d := Diff{Added: []SessionInfo{}, Updated: []SessionInfo{}, Removed: []SessionInfo{}}
	now := make(map[string]SessionInfo, len(l.Sessions))
	for _, s := range l.Sessions {
		now[s.Path] = s
		old, ok := w.known[s.Path]
		switch {
		case !ok:
			d.Added = append(d.Added, s)
		case !sameInfo(old, s):
			d.Updated = append(d.Updated, s)
		}
	}
	for path, s := range w.known {
		if _, ok := now[path]; !ok {
			d.Removed = append(d.Removed, s)
		}
	}
	sortByPath(d.Removed)
	w.known = now
	return d, nil
}

func sameInfo(a, b SessionInfo) bool {
	return a.SessionID == b.SessionID && a.Path == b.Path && a.Name == b.Name && a.Cwd == b.Cwd &&
		a.Kind == b.Kind && a.Pinned == b.Pinned && a.ParentSession == b.ParentSession && a.UpdatedAt == b.UpdatedAt
}

// Run polls every interval until ctx ends and calls emit with every
// non-empty Diff, on Run's goroutine. A failed poll is logged and retried
// at the next tick; Run returns ctx's error.
func (w *Watcher) Run(ctx context.Context, interval time.Duration, emit func(Diff)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		d, err := w.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.lister.cfg.log.Warn().Err(err).Str("root", w.lister.root).Msg("session watch: listing failed; retrying")
			continue
		}
		if !d.Empty() {
			emit(d)
		}
	}
}
