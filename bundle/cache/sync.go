package cache

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/jpillora/backoff"
	"github.com/rs/zerolog"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/pathsafe"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/internal/fsmkit"
)

// Status is how a sync ended well.
type Status string

// The statuses of a successful sync: the final states of SyncTable.
const (
	// StatusReady: the registry's current version is in the cache.
	StatusReady Status = "ready"
	// StatusDegraded: the registry was unavailable; the last cached
	// version is used. Report it: the worker may run an old bundle.
	StatusDegraded Status = "ready_degraded"
)

// Backoff gives the pause before retry n (0 for the first retry).
// *backoff.Backoff satisfies it.
type Backoff interface {
	ForAttempt(attempt float64) time.Duration
}

// Defaults of SyncOptions.
const (
	DefaultConcurrency = 8
	DefaultAttempts    = 3
)

// DefaultBackoff pauses 250 ms, then 500 ms, between fetch attempts.
var DefaultBackoff Backoff = &backoff.Backoff{Min: 250 * time.Millisecond, Max: 500 * time.Millisecond, Factor: 2}

// SyncOptions tunes a sync. The zero value uses the defaults.
type SyncOptions struct {
	// PinnedHash, when set, is the only bundleHash accepted
	// (PI_FLEET_BUNDLE_HASH); another version is refused, from the
	// registry or from the cache.
	PinnedHash string
	// Concurrency is the number of files fetched at once.
	Concurrency int
	// Attempts is how many times a file is tried before the sync fails; a
	// hash mismatch counts as a failed attempt.
	Attempts int
	// Backoff paces the attempts.
	Backoff Backoff
	// Progress, when set, is called on every state change and every file
	// done, from the goroutine that called Sync.
	Progress func(Progress)
}

// Progress reports how far a sync got.
type Progress struct {
	Bundle     string
	State      SyncState
	FilesTotal int
	BytesTotal int64
	// Fetched and Reused count files done so far, and their bytes.
	Fetched, Reused           int
	FetchedBytes, ReusedBytes int64
}

// Result describes a successful sync.
type Result struct {
	Status     Status
	Bundle     string
	BundleHash string
	// Origin is the registry's URL.
	Origin string
	// Dir holds the bundle's files: <root>/<bundleHash>.
	Dir      string
	Manifest *bundle.Manifest
	// Resources are the manifest's resources resolved under Dir.
	Resources bundle.Resources
	// CacheHit is set when the version was already cached (no file moved).
	CacheHit bool
	// Fetched and Reused list the manifest paths downloaded and those
	// copied from the previous version of the bundle.
	Fetched, Reused           []string
	FetchedBytes, ReusedBytes int64
	// RegistryErr is why the registry was not used, on a degraded start.
	RegistryErr error
	// Trail lists the states the sync went through, first to last.
	Trail []SyncState
}

// Sync makes bundle name from reg available in the cache and returns
// where, following the bundle-sync machine (SyncTable):
//
//   - fetch the manifest; a registry that is unreachable or does not know
//     the bundle leads to the cached copy (StatusDegraded) or, with none,
//     to a *SyncError naming the registry and the bundle;
//   - refuse an invalid or unsafe manifest, and a version other than
//     opts.PinnedHash, before anything is written;
//   - when <root>/<bundleHash>/ exists, that is it (a cache hit);
//   - otherwise stage the version in a fresh directory: files unchanged
//     since the version the name pointed to are linked or copied from it,
//     the others fetched in parallel, each verified by SHA-256 and retried;
//     check that the staged tree is exactly the manifest's files; rename
//     it to <root>/<bundleHash>/ in one step and point the name at it.
//
// A sync killed at any moment leaves no partial version and no damaged
// pointer; the next one removes its staging directory.
func (c *Cache) Sync(ctx context.Context, reg registry.Client, name string, opts SyncOptions) (*Result, error) {
	if err := bundle.ValidName(name); err != nil {
		return nil, err
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Attempts <= 0 {
		opts.Attempts = DefaultAttempts
	}
	if opts.Backoff == nil {
		opts.Backoff = DefaultBackoff
	}
	r := &run{
		c: c, reg: reg, name: name, opts: opts, ctx: ctx,
		machine: SyncTable.Start(),
		log:     c.log.With().Str("bundle", name).Str("registry", reg.Origin()).Logger(),
		res:     &Result{Bundle: name, Origin: reg.Origin()},
	}
	if n, err := c.CleanStaging(); err != nil {
		r.log.Warn().Err(err).Msg("cleaning stale staging directories")
	} else if n > 0 {
		r.log.Info().Int("removed", n).Msg("removed staging directories of interrupted syncs")
	}
	defer func() {
		if r.stage != nil {
			if err := r.stage.release(); err != nil {
				r.log.Warn().Err(err).Msg("releasing the staging area")
			}
		}
	}()
	return r.drive()
}

// run is one sync: the machine and what its steps learn. It lives in the
// goroutine that called Sync.
type run struct {
	c       *Cache
	reg     registry.Client
	name    string
	opts    SyncOptions
	ctx     context.Context
	machine fsmkit.Machine[SyncState, SyncEvent]
	log     zerolog.Logger

	res      *Result
	err      error            // why the sync is failing
	manifest *bundle.Manifest // the version being synced
	cached   *Pointer         // the usable cached copy, on the degraded path
	base     *Pointer         // the previous version of the name, when its directory exists
	stage    *stage
	jobs     []job
	progress Progress
}

// drive runs the step of each state and fires its outcome until a final
// state is reached. Every side effect happens inside a step, after the
// machine entered that step's state.
func (r *run) drive() (*Result, error) {
	for {
		state := r.machine.State()
		r.res.Trail = append(r.res.Trail, state)
		r.report()
		if SyncTable.IsFinal(state) {
			return r.finish(state)
		}
		ev := r.step(state)
		if err := r.machine.Fire(ev); err != nil {
			// The steps only return events their state accepts; reaching
			// this is a bug in this file.
			r.log.Error().Err(err).Msg("bundle-sync driver fired a stale event")
			return nil, &SyncError{Code: CodeCacheFailed, Bundle: r.name, Registry: r.reg.Origin(), State: state, Err: err}
		}
		r.log.Debug().Str("from", string(state)).Str("event", string(ev)).Str("to", string(r.machine.State())).Msg("bundle-sync transition")
	}
}

func (r *run) step(s SyncState) SyncEvent {
	switch s {
	case StateFetchManifest:
		return r.fetchManifest()
	case StateUseStaleCache:
		return r.useStaleCache()
	case StateCacheCheck:
		return r.cacheCheck()
	case StateDiffing:
		return r.diff()
	case StateFetching:
		return r.fetchAll()
	case StateValidating:
		return r.validate()
	case StateSwapping:
		return r.swap()
	case StateReject:
		return EventRejected
	}
	r.fail(CodeCacheFailed, "", fmt.Errorf("no step for state %s", s))
	return EventFailed
}

func (r *run) finish(state SyncState) (*Result, error) {
	switch state {
	case StateReady:
		r.res.Status = StatusReady
	case StateReadyDegraded:
		r.res.Status = StatusDegraded
		r.log.Warn().Err(r.res.RegistryErr).Str("bundleHash", r.res.BundleHash).Msg("registry unavailable: starting from the cached copy")
	default:
		r.log.Warn().Err(r.err).Msg("bundle sync failed")
		return nil, r.err
	}
	return r.res, nil
}

func (r *run) fail(code bundle.ErrorCode, path string, err error) {
	r.err = &SyncError{Code: code, Bundle: r.name, Registry: r.reg.Origin(), Path: path, State: r.machine.State(), Err: err}
}

func (r *run) report() {
	if r.opts.Progress == nil {
		return
	}
	r.progress.Bundle = r.name
	r.progress.State = r.machine.State()
	r.opts.Progress(r.progress)
}

// accept fills the result from the version that will be used.
func (r *run) accept(m *bundle.Manifest, res bundle.Resources) {
	r.res.BundleHash = m.BundleHash
	r.res.Manifest = m
	r.res.Dir = r.c.Dir(m.BundleHash)
	r.res.Resources = res
}

func (r *run) fetchManifest() SyncEvent {
	m, err := r.reg.Manifest(r.ctx, r.name)
	switch {
	case err == nil:
	case r.ctx.Err() != nil:
		r.fail(bundle.CodeFetchFailed, "", err)
		return EventFailed
	case errors.Is(err, bundle.CodeUnsafePath):
		r.fail(bundle.CodeUnsafePath, "", err)
		return EventManifestRejected
	case errors.Is(err, bundle.CodeInvalidManifest):
		r.fail(bundle.CodeInvalidManifest, "", err)
		return EventManifestRejected
	default: // unreachable, not_found, or a client's own failure
		r.res.RegistryErr = err
		if cached := r.usableCopy(); cached != nil {
			r.cached = cached
			return EventRegistryDownCached
		}
		code := bundle.CodeUnreachable
		if errors.Is(err, bundle.CodeNotFound) {
			code = bundle.CodeNotFound
		}
		r.fail(code, "", fmt.Errorf("registry unreachable and no cached copy of bundle %q: %w", r.name, err))
		return EventRegistryDownNoCache
	}
	if m.Name != r.name {
		r.fail(bundle.CodeInvalidManifest, "", fmt.Errorf("registry served the manifest of bundle %q", m.Name))
		return EventManifestRejected
	}
	res, err := m.Resources(r.c.Dir(m.BundleHash))
	if err != nil {
		r.fail(bundle.CodeUnsafePath, "", err)
		return EventManifestRejected
	}
	if p := r.opts.PinnedHash; p != "" && p != m.BundleHash {
		r.fail(bundle.CodeHashMismatch, "", &PinError{Bundle: r.name, Pinned: p, Got: m.BundleHash})
		return EventPinMismatch
	}
	r.manifest = m
	r.accept(m, res)
	r.progress.FilesTotal, r.progress.BytesTotal = len(m.Files), m.TotalBytes()
	return EventManifestOK
}

// usableCopy returns the name's pointer when its version is in the cache
// and its resources resolve.
func (r *run) usableCopy() *Pointer {
	p, err := r.c.Pointer(r.name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn().Err(err).Msg("cached pointer unusable")
		}
		return nil
	}
	if ok, _ := isDir(r.c.Dir(p.BundleHash)); !ok {
		return nil
	}
	if _, err := p.Manifest.Resources(r.c.Dir(p.BundleHash)); err != nil {
		return nil
	}
	return p
}

func (r *run) useStaleCache() SyncEvent {
	m := r.cached.Manifest
	if p := r.opts.PinnedHash; p != "" && p != m.BundleHash {
		r.fail(bundle.CodeHashMismatch, "", &PinError{Bundle: r.name, Pinned: p, Got: m.BundleHash, Degraded: true})
		return EventPinMismatch
	}
	res, _ := m.Resources(r.c.Dir(m.BundleHash)) // checked by usableCopy
	r.accept(m, res)
	return EventStaleCacheUsed
}

func (r *run) cacheCheck() SyncEvent {
	hit, err := isDir(r.res.Dir)
	if err != nil {
		r.fail(CodeCacheFailed, "", err)
		return EventFailed
	}
	if !hit {
		return EventCacheMiss
	}
	if err := r.c.writePointer(&r.stage, r.manifest); err != nil {
		r.fail(CodeCacheFailed, "", fmt.Errorf("updating the pointer: %w", err))
		return EventFailed
	}
	r.res.CacheHit = true
	return EventCacheHit
}

// job is one file to put in the staging directory.
type job struct {
	file bundle.File
	dst  string // native path in the staging directory
	base string // native path of the same content in the previous version, or ""
}

func (r *run) diff() SyncEvent {
	if p, err := r.c.Pointer(r.name); err == nil && p.BundleHash != r.manifest.BundleHash {
		if ok, _ := isDir(r.c.Dir(p.BundleHash)); ok {
			r.base = p
		}
	}
	st, err := r.c.newStage()
	if err == nil {
		r.stage = st
		err = os.Mkdir(st.dir(), 0o755)
	}
	if err != nil {
		r.fail(CodeCacheFailed, "", fmt.Errorf("creating a staging directory: %w", err))
		return EventFailed
	}
	// Both file lists are in manifest (UTF-16) order: walk them together
	// to find the files the previous version already has.
	var old []bundle.File
	var oldDir string
	if r.base != nil {
		old, oldDir = r.base.Manifest.Files, r.c.Dir(r.base.BundleHash)
	}
	dirs := map[string]bool{}
	r.jobs = make([]job, len(r.manifest.Files))
	for i, f := range r.manifest.Files {
		// ParseManifest checked the paths; a Client may hand over a
		// manifest of its own making, so check again (it is cheap).
		if err := pathsafe.Check(f.Path); err != nil {
			r.fail(bundle.CodeUnsafePath, f.Path, err)
			return EventFailed
		}
		native := string(filepath.Separator) + filepath.FromSlash(f.Path)
		r.jobs[i] = job{file: f, dst: st.dir() + native}
		for len(old) > 0 && bundle.CompareUTF16(old[0].Path, f.Path) < 0 {
			old = old[1:]
		}
		if len(old) > 0 && old[0].Path == f.Path && old[0].SHA256 == f.SHA256 && old[0].Bytes == f.Bytes {
			r.jobs[i].base = oldDir + native
		}
		for d := path.Dir(f.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// Parents before children: sorted paths list a directory before its
	// subdirectories.
	ordered := make([]string, 0, len(dirs))
	for d := range dirs {
		ordered = append(ordered, d)
	}
	slices.Sort(ordered)
	for _, d := range ordered {
		if err := os.Mkdir(filepath.Join(st.dir(), filepath.FromSlash(d)), 0o755); err != nil {
			r.fail(CodeCacheFailed, d, err)
			return EventFailed
		}
	}
	return EventDiffed
}

func (r *run) validate() SyncEvent {
	files := 0
	var bad string
	err := filepath.WalkDir(r.stage.dir(), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.Type().IsRegular():
			files++
		case !d.IsDir():
			bad = p
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		r.fail(CodeCacheFailed, "", fmt.Errorf("checking the staged files: %w", err))
		return EventFailed
	}
	// Every manifest file was created exactly once (O_EXCL) inside the
	// staging directory; with as many regular files in the tree and nothing
	// else, the tree is exactly the manifest's files.
	if bad != "" || files != len(r.manifest.Files) {
		r.fail(bundle.CodeUnsafePath, "", fmt.Errorf("the staged tree is not the manifest's %d files (found %d regular files, unexpected entry %q)", len(r.manifest.Files), files, bad))
		return EventTreeRejected
	}
	return EventVerified
}

func (r *run) swap() SyncEvent {
	if r.c.durable {
		if err := flushTree(r.stage.dir()); err != nil {
			r.fail(CodeCacheFailed, "", fmt.Errorf("flushing the staged files: %w", err))
			return EventFailed
		}
	}
	if err := os.Rename(r.stage.dir(), r.res.Dir); err != nil {
		// Another sync of the same version won the race: its copy is as
		// good as ours.
		if ok, _ := isDir(r.res.Dir); !ok {
			r.fail(CodeCacheFailed, "", fmt.Errorf("moving the new version into place: %w", err))
			return EventFailed
		}
		r.log.Debug().Msg("a concurrent sync installed the same version first")
	}
	if r.c.durable {
		if err := syncDir(r.c.root); err != nil {
			r.fail(CodeCacheFailed, "", err)
			return EventFailed
		}
	}
	if err := r.c.writePointer(&r.stage, r.manifest); err != nil {
		r.fail(CodeCacheFailed, "", fmt.Errorf("updating the pointer: %w", err))
		return EventFailed
	}
	return EventSwapped
}
