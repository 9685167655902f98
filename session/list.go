package session

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// DefaultRoot returns where pi writes session files, the way pi resolves
// it: $PI_CODING_AGENT_SESSION_DIR when set (files directly inside), else
// $PI_CODING_AGENT_DIR/sessions, else ~/.pi/agent/sessions (one directory per
// cwd inside). A leading "~/" in either variable is expanded, as pi does.
func DefaultRoot() (string, error) {
	if d := os.Getenv("PI_CODING_AGENT_SESSION_DIR"); d != "" {
		return expandHome(d)
	}
	if d := os.Getenv("PI_CODING_AGENT_DIR"); d != "" {
		d, err := expandHome(d)
		return filepath.Join(d, "sessions"), err
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("session: no sessions root: %w", err)
	}
	return filepath.Join(home, ".pi", "agent", "sessions"), nil
}

func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("session: expanding %s: %w", p, err)
	}
	return filepath.Join(home, p[1:]), nil
}

// Listing is the result of one walk of a sessions root.
type Listing struct {
	// Sessions holds every session file, newest first (UpdatedAt, then
	// path). It is never nil, and never capped: paging is the wire's job
	// (see Paginate).
	Sessions []SessionInfo
	// Skipped holds every *.jsonl file that is not a session (yet): no
	// complete header, a bad header, unreadable. Nothing is dropped
	// without a trace here and in the log.
	Skipped []Skipped
}

// Skipped is a file a listing could not use, and why.
type Skipped struct {
	Path string
	Err  error
}

// Lister lists the session files under a root: every *.jsonl file,
// recursively (symbolic links are not followed). For each file it reads the
// header and the session_info entries (to find the name, which real pi keeps
// there and not in the header).
//
// It caches what it read per path, keyed by modification time and size, so
// re-listing unchanged files costs one stat each. A file that only grew (pi
// appends) is read from where the last pass stopped, after checking that
// its header line is unchanged.
//
// UpdatedAt is the file's modification time: it changes with every append,
// costs nothing to read and is what the cache and the Watcher key on; the
// last entry's timestamp is pi's clock and would need the file's tail (see
// Summary.LastTimestamp for it).
//
// SessionID is the header's id. Should two files carry the same id (a
// session file copied by hand), the one whose file name ends in "_<id>"
// (pi's own naming; else the lexically first path) keeps it and each other
// gets "<id>@<path relative to the root, without .jsonl>", so ids stay
// unique within a listing and stable while the set of files is.
//
// A Lister is safe for concurrent use.
type Lister struct {
	root string
	cfg  config

	mu    sync.Mutex
	cache map[string]*listed
	pass  uint64 // counts List calls; an entry not seen in this pass is evicted
}

// listed is the cached outcome of reading one file.
type listed struct {
	pass    uint64
	modTime int64 // UnixNano
	size    int64
	info    SessionInfo
	err     error
	// for reading on when the file grows
	header  []byte
	scanned int64
	name    *string
}

// NewLister returns a Lister for root (see DefaultRoot).
func NewLister(root string, opts ...Option) *Lister {
	return &Lister{root: root, cfg: newConfig(opts), cache: map[string]*listed{}}
}

// Root returns the directory the Lister walks.
func (l *Lister) Root() string { return l.root }

type pending struct {
	path string
	fi   fs.FileInfo
	prev *listed
	out  *listed
}

// List walks the root. A root that does not exist yet is an empty listing
// (pi creates it with the first session). Files that cannot be used are
// reported in Listing.Skipped; List itself fails only when ctx ends or the
// root cannot be walked at all.
func (l *Lister) List(ctx context.Context) (Listing, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := Listing{}
	var todo []*pending
	ready := make([]*listed, 0, len(l.cache))
	l.pass++
	err := filepath.WalkDir(l.root, func(path string, d fs.DirEntry, err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			if path == l.root && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			if path == l.root {
				return err
			}
			l.cfg.log.Warn().Str("path", path).Err(err).Msg("sessions directory unreadable")
			out.Skipped = append(out.Skipped, Skipped{Path: path, Err: err})
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".jsonl") {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walked: it is simply gone
		}
		if err != nil {
			out.Skipped = append(out.Skipped, Skipped{Path: path, Err: err})
			return nil
		}
		prev := l.cache[path]
		if prev != nil && prev.modTime == fi.ModTime().UnixNano() && prev.size == fi.Size() {
			prev.pass = l.pass
			ready = append(ready, prev)
			return nil
		}
		todo = append(todo, &pending{path: path, fi: fi, prev: prev})
		return nil
	})
	if err != nil {
		return Listing{}, fmt.Errorf("session: listing %s: %w", l.root, err)
	}
	l.readAll(ctx, todo)
	if err := ctx.Err(); err != nil {
		return Listing{}, err
	}
	for _, p := range todo {
		ready = append(ready, p.out)
		var content *LineError
		switch {
		case p.out.err == nil:
		case errors.Is(p.out.err, ErrNoHeader):
			// pi is about to write it: normal, and seen again when it has.
			l.cfg.log.Debug().Str("path", p.path).Msg("session file has no header yet")
		case errors.As(p.out.err, &content):
			// Logged when read, not on every pass over the cached failure.
			l.cfg.log.Warn().Str("path", p.path).Err(p.out.err).Msg("session file skipped")
		default:
			// An I/O failure may pass without the file changing: not
			// cached, so the next pass tries again.
			l.cfg.log.Warn().Str("path", p.path).Err(p.out.err).Msg("session file unreadable")
			continue
		}
		p.out.pass = l.pass
		l.cache[p.path] = p.out
	}
	for path, e := range l.cache {
		if e.pass != l.pass {
			delete(l.cache, path)
		}
	}
	out.Sessions = make([]SessionInfo, 0, len(ready))
	for _, e := range ready {
		if e.err != nil {
			out.Skipped = append(out.Skipped, Skipped{Path: e.info.Path, Err: e.err})
			continue
		}
		out.Sessions = append(out.Sessions, e.info)
	}
	slices.SortFunc(out.Skipped, func(a, b Skipped) int { return cmp.Compare(a.Path, b.Path) })
	dedupeIDs(l.root, out.Sessions)
	sortNewestFirst(out.Sessions)
	return out, nil
}

// readAll reads the changed files, on as many goroutines as there are CPUs
// (the work is a mix of I/O and JSON decoding).
func (l *Lister) readAll(ctx context.Context, todo []*pending) {
	workers := min(runtime.GOMAXPROCS(0), len(todo))
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				next.Lock()
				if i == len(todo) {
					next.Unlock()
					return
				}
				p := todo[i]
				i++
				next.Unlock()
				p.out = l.read(p.path, p.fi, p.prev)
			}
		})
	}
	wg.Wait()
}

var sessionInfoToken = []byte(`"` + string(TypeSessionInfo) + `"`)

// read reads one file: its header, then the session_info entries, from the
// start or, when the file only grew, from where prev stopped.
func (l *Lister) read(path string, fi fs.FileInfo, prev *listed) *listed {
	e := &listed{modTime: fi.ModTime().UnixNano(), size: fi.Size(), info: SessionInfo{Path: path}}
	fh, err := os.Open(path)
	if err != nil {
		e.err = err
		return e
	}
	defer fh.Close()
	r := newLineReader(fh, 0, 1, l.cfg.maxLine)
	defer r.release()
	line, _, err := r.next()
	switch {
	case errors.Is(err, io.EOF):
		e.err = &LineError{Path: path, Line: 1, Err: ErrNoHeader}
		return e
	case errors.Is(err, errTooLong):
		e.err = r.tooLongError(path, 0)
		return e
	case err != nil:
		e.err = err
		return e
	}
	h, err := parseHeader(line)
	if err != nil {
		e.err = &LineError{Path: path, Line: 1, Err: err}
		return e
	}
	e.header = bytes.Clone(line)
	if prev != nil && prev.err == nil && bytes.Equal(prev.header, e.header) && grewFrom(fh, prev.scanned, fi.Size()) {
		if _, err := fh.Seek(prev.scanned, io.SeekStart); err == nil {
			r.reset(fh, prev.scanned, 0)
			e.name = prev.name
		}
	}
	for {
		line, _, err := r.next()
		if errors.Is(err, errTooLong) {
			continue
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				e.err = err
				return e
			}
			break
		}
		// Only a line holding the JSON string "session_info" can be one;
		// inside a string value the quotes would be escaped.
		if !bytes.Contains(line, sessionInfoToken) {
			continue
		}
		if head, err := parseHead(line, false); err == nil && EntryType(head.Type) == TypeSessionInfo {
			n := ""
			if head.Name != nil {
				n = *head.Name
			}
			e.name = &n
		}
	}
	e.scanned = r.off
	e.info = infoFor(path, h, resolveName(h, e.name), fi)
	return e
}

// grewFrom reports whether a file of size still has a line boundary at
// offset, i.e. it plausibly only grew since it was read up to offset.
func grewFrom(fh *os.File, offset, size int64) bool {
	if offset <= 0 || size < offset {
		return false
	}
	var b [1]byte
	_, err := fh.ReadAt(b[:], offset-1)
	return err == nil && b[0] == '\n'
}

func infoFor(path string, h Header, name string, fi fs.FileInfo) SessionInfo {
	id := h.ID
	if id == "" {
		id = strings.TrimSuffix(filepath.Base(path), ".jsonl")
	}
	cwd := h.Cwd
	if cwd == "" {
		cwd = UnknownCwd
	}
	kind := KindOf(name)
	return SessionInfo{
		SessionID:     id,
		Path:          path,
		Name:          name,
		Cwd:           cwd,
		Kind:          kind,
		Pinned:        kind == KindBaseline,
		ParentSession: h.ParentSession,
		UpdatedAt:     MillisOf(fi.ModTime()),
	}
}

// dedupeIDs makes session ids unique (see Lister).
func dedupeIDs(root string, infos []SessionInfo) {
	count := make(map[string]int, len(infos))
	for _, s := range infos {
		count[s.SessionID]++
	}
	byID := map[string][]int{}
	for i, s := range infos {
		if count[s.SessionID] > 1 {
			byID[s.SessionID] = append(byID[s.SessionID], i)
		}
	}
	for id, idx := range byID {
		owner := func(i int) bool {
			return strings.HasSuffix(strings.TrimSuffix(filepath.Base(infos[i].Path), ".jsonl"), "_"+id)
		}
		slices.SortFunc(idx, func(a, b int) int {
			if oa, ob := owner(a), owner(b); oa != ob {
				if oa {
					return -1
				}
				return 1
			}
			return cmp.Compare(infos[a].Path, infos[b].Path)
		})
		for _, i := range idx[1:] {
			rel, err := filepath.Rel(root, infos[i].Path)
			if err != nil {
				rel = infos[i].Path
			}
			infos[i].SessionID = id + "@" + strings.TrimSuffix(filepath.ToSlash(rel), ".jsonl")
		}
	}
}

func sortNewestFirst(infos []SessionInfo) {
	slices.SortFunc(infos, func(a, b SessionInfo) int {
		if c := cmp.Compare(b.UpdatedAt, a.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.Path, b.Path)
	})
}

func sortByPath(infos []SessionInfo) {
	slices.SortFunc(infos, func(a, b SessionInfo) int { return cmp.Compare(a.Path, b.Path) })
}
