package fleet

import (
	"context"
	"fmt"

	"example.com/pifleet/bundle/rebundle"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// FileResult is an answer of the agent's read-only file service.
type FileResult struct {
	// Text is the text (Read of a text file, Diff, Grep); nil when the
	// answer has none.
	Text *string
	// Base64 and Mime carry a binary file (an image).
	Base64, Mime string
	// Entries is a directory listing (List).
	Entries   []transport.FsEntry
	Truncated bool
}

func (f *Fleet) fs(ctx context.Context, id, op string, mk func() transport.Frame) (FileResult, error) {
	ans, err := f.request(ctx, id, trust.OpView, false, func(*instance) transport.Frame { return mk() })
	if err != nil {
		return FileResult{}, err
	}
	res, ok := ans.(*transport.FsResultFrame)
	if !ok {
		return FileResult{}, wrongAnswer(op, (*transport.FsResultFrame)(nil), ans)
	}
	if res.Error != nil {
		return FileResult{}, &FileError{Op: op, Code: res.Error.Code, Message: res.Error.Message}
	}
	return FileResult{Text: res.Text, Base64: res.Base64, Mime: res.Mime, Entries: res.Entries, Truncated: res.Truncated}, nil
}

// DiffOptions tune Diff: git diff against Ref (default the working tree's
// HEAD), of the index (Staged), as --stat (Stat).
type DiffOptions struct {
	Ref          string
	Staged, Stat bool
	// Base diffs an isolated worker's worktree against the commit its
	// branch started from, new files included: the task's whole change
	// (Ref and Staged are then ignored). A worker without a worktree is a
	// *FileError with code not_isolated.
	Base bool
}

// Diff runs git diff in the instance's cwd, without the worker.
func (i *Instance) Diff(ctx context.Context, opts DiffOptions) (FileResult, error) {
	return i.f.fs(ctx, i.id, "fs_diff", func() transport.Frame {
		return &transport.FsDiffFrame{InstanceID: i.id, Ref: opts.Ref, Staged: opts.Staged, Stat: opts.Stat, Base: opts.Base}
	})
}

// ReadOptions page a text file by lines for Read.
type ReadOptions struct {
	// Offset is the first line to read, counted from 1 (0: the start).
	Offset int
	// Limit is how many lines to read at most (0: the agent's default).
	Limit int
}

// Read reads a file of the instance's cwd.
func (i *Instance) Read(ctx context.Context, path string, opts ReadOptions) (FileResult, error) {
	if opts.Offset < 0 || opts.Limit < 0 {
		return FileResult{}, &ConfigError{Field: "ReadOptions", Reason: fmt.Sprintf("offset %d and limit %d must not be negative", opts.Offset, opts.Limit)}
	}
	var offset, limit *float64
	if opts.Offset > 0 {
		v := float64(opts.Offset)
		offset = &v
	}
	if opts.Limit > 0 {
		v := float64(opts.Limit)
		limit = &v
	}
	return i.f.fs(ctx, i.id, "fs_read", func() transport.Frame {
		return &transport.FsReadFrame{InstanceID: i.id, Path: path, Offset: offset, Limit: limit}
	})
}

// List lists a directory of the instance's cwd.
func (i *Instance) List(ctx context.Context, path string) (FileResult, error) {
	return i.f.fs(ctx, i.id, "fs_list", func() transport.Frame {
		return &transport.FsListFrame{InstanceID: i.id, Path: path}
	})
}

// Grep searches the instance's cwd for pattern in files matching glob
// ("" for all).
func (i *Instance) Grep(ctx context.Context, pattern, glob string) (FileResult, error) {
	return i.f.fs(ctx, i.id, "fs_grep", func() transport.Frame {
		return &transport.FsGrepFrame{InstanceID: i.id, Pattern: pattern, Glob: glob}
	})
}

// SetTools narrows (or widens) the worker's active tools; the agent
// restarts it on its session with them (pifleet agents only).
func (i *Instance) SetTools(ctx context.Context, tools []string) ([]string, error) {
	ans, err := i.f.request(ctx, i.id, trust.OpSteer, true, func(inst *instance) transport.Frame {
		return &transport.SetToolsFrame{InstanceID: inst.id, Tools: append([]string{}, tools...)}
	})
	if err != nil {
		return nil, err
	}
	set, ok := ans.(*transport.ToolsSetFrame)
	if !ok {
		return nil, wrongAnswer("set_tools", (*transport.ToolsSetFrame)(nil), ans)
	}
	return set.Tools, nil
}

// Rebundle switches the worker to bundle on the same session:
// the agent syncs it and reloads the worker. The fleet follows the
// rebundle machine (bundle/rebundle.Table) from the answer; on failure
// the worker keeps its bundle and the error is a *RebundleError. The
// platform check runs before any frame, as for Spawn.
func (i *Instance) Rebundle(ctx context.Context, bundleName string) error {
	f := i.f
	man, err := registry.Show(f.cfg.RegistryRoot, bundleName)
	if err != nil {
		return fmt.Errorf("fleet: rebundle: %w", err)
	}
	f.mu.Lock()
	inst, a, _, err := f.lookupLocked(i.id, trust.OpSteer)
	if err == nil {
		err = man.CheckPlatform(a.platform())
	}
	var from string
	if inst != nil {
		from = inst.rec.Bundle
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	m := rebundle.Table.Start()
	step := func(ev rebundle.Event) {
		if err := m.Fire(ev); err != nil {
			f.log.Debug().Err(err).Str("instance", i.id).Msg("rebundle: stale event")
			return
		}
		f.log.Info().Str("instance", i.id).Str("event", string(ev)).Str("state", string(m.State())).Msg("rebundle transition")
	}
	step(rebundle.EventUse)
	ctx, cancel := context.WithTimeout(ctx, f.cfg.SpawnTimeout)
	defer cancel()
	url := f.RegistryURL()
	ans, err := f.request(ctx, i.id, trust.OpSteer, true, func(inst *instance) transport.Frame {
		return &transport.RebundleFrame{InstanceID: inst.id, Bundle: bundleName, Registry: url}
	})
	if err != nil {
		step(rebundle.EventSyncFailed)
		step(rebundle.EventKept)
		return err
	}
	rb, ok := ans.(*transport.RebundledFrame)
	if !ok {
		step(rebundle.EventSyncFailed)
		step(rebundle.EventKept)
		return wrongAnswer("rebundle", (*transport.RebundledFrame)(nil), ans)
	}
	if !rb.Switched {
		re := &RebundleError{InstanceID: i.id, Bundle: from, Target: bundleName}
		if rb.Error != nil {
			re.Code, re.Message = rb.Error.Code, rb.Error.Message
		}
		if re.Code == "restart_failed" { // synced, but the worker could not restart with it
			step(rebundle.EventSynced)
			step(rebundle.EventReloadFailed)
		} else {
			step(rebundle.EventSyncFailed)
		}
		step(rebundle.EventKept)
		return re
	}
	step(rebundle.EventSynced)
	step(rebundle.EventReloaded)
	f.mu.Lock()
	inst.rec.Bundle, inst.rec.BundleHash = rb.Bundle, rb.BundleHash
	inst.rec.Degraded = rb.Degraded
	if man.Review != nil {
		if n, err := ResolveMaxRejects(man.Review.MaxRejects); err == nil {
			inst.maxRejects = n
		}
	}
	if man.UI != nil {
		inst.autoAnswer = man.UI.AutoAnswer
	}
	f.persistInstanceLocked(inst)
	f.mu.Unlock()
	return f.durable(inst) // the new bundle is on disk before Rebundle answers
}

// SearchSessions searches the pi sessions of agent machine.
func (f *Fleet) SearchSessions(ctx context.Context, machine, query, cwd string) ([]transport.SessionHit, error) {
	f.mu.lockAgents()
	_, c, err := f.connForLocked(machine, trust.OpView)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ans, err := c.Request(ctx, &transport.SessionSearchFrame{Query: query, Cwd: cwd})
	if err != nil {
		return nil, err
	}
	hits, ok := ans.(*transport.SessionHitsFrame)
	if !ok {
		return nil, wrongAnswer("session_search", (*transport.SessionHitsFrame)(nil), ans)
	}
	return hits.Hits, nil
}
