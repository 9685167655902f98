package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"example.com/pifleet/fleet/agent/internal/worktree"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
)

// Delivery error codes (error.code). The worktree package's codes
// (merge_conflict, target_dirty, no_target, git_failed) are sent as they
// are.
const (
	CodeNotIsolated   = "not_isolated"
	CodePatchTooLarge = "patch_too_large"
)

// maxPatchBytes keeps a delivered patch within one frame.
const maxPatchBytes = 900 << 10

// isolated is an instance's git worktree and what happened to it.
type isolated struct {
	worktree.Tree
	// Provisional: the branch still has its spawn-time name
	// (pifleet/<instanceId>); the first task renames it.
	Provisional bool `json:"provisional,omitempty"`
	// Delivered is the last delivery mode; the worktree is then removed
	// when the worker ends, and the branch kept for branch and merge.
	Delivered transport.DeliveryMode `json:"delivered,omitempty"`
	// InstanceID owns the tree.
	InstanceID string `json:"instanceId"`
}

// worktreeRoot holds the workers' worktrees and one record file per
// worktree, written before the worktree is made: a restarted agent finds
// every worktree it made, even one it died making.
func (a *Agent) worktreeRoot() string { return filepath.Join(a.cfg.StateDir, "worktrees") }

func (a *Agent) worktreeRecord(id string) string { return filepath.Join(a.worktreeRoot(), id+".json") }

func (a *Agent) saveWorktree(t *isolated) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(a.worktreeRoot(), 0o700); err != nil {
		return err
	}
	tmp := a.worktreeRecord(t.InstanceID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, a.worktreeRecord(t.InstanceID))
}

// isolate makes the worktree a spawn asked for (nil when it asked for
// none). Every refusal comes before any change to the repository.
func (a *Agent) isolate(ctx context.Context, f *transport.SpawnFrame, id string) (*isolated, *SpawnError) {
	iso := f.Isolation
	if iso == nil {
		return nil, nil
	}
	branch, provisional := iso.Branch, false
	if branch == "" {
		branch, provisional = "pifleet/"+id, true
	}
	plan, err := a.git.Plan(ctx, worktree.Spec{Cwd: f.Cwd, Dir: filepath.Join(a.worktreeRoot(), id), Branch: branch, Base: iso.Base})
	if err != nil {
		return nil, isolationRefusal(err)
	}
	t := &isolated{Tree: plan, Provisional: provisional, InstanceID: id}
	if err := a.saveWorktree(t); err != nil {
		return nil, refuse(CodeSpawnFailed, "cannot record the worktree: %v", err)
	}
	if err := a.git.Create(ctx, plan); err != nil {
		a.dropWorktree(ctx, t, true)
		return nil, isolationRefusal(err)
	}
	return t, nil
}

func isolationRefusal(err error) *SpawnError {
	var we *worktree.Error
	if errors.As(err, &we) {
		return refuse(we.Code, "isolation: %s", we.Message)
	}
	return refuse(CodeSpawnFailed, "isolation: %v", err)
}

// dropWorktree removes t's worktree (the branch too with deleteBranch)
// and its record.
func (a *Agent) dropWorktree(ctx context.Context, t *isolated, deleteBranch bool) {
	if err := a.git.Remove(context.WithoutCancel(ctx), t.Tree, deleteBranch); err != nil {
		a.log.Warn().Err(err).Str("instanceId", t.InstanceID).Str("dir", t.Dir).Msg("worktree not fully removed")
	}
	if err := os.Remove(a.worktreeRecord(t.InstanceID)); err != nil && !os.IsNotExist(err) {
		a.log.Warn().Err(err).Msg("worktree record not removed")
	}
}

// reconcileWorktrees runs after re-adoption: the worktree of a worker
// that still runs is its own again; every other one (its worker ended in
// a previous life, or the agent died making it) has its uncommitted work
// committed on its branch and is removed, so that nothing is lost and
// nothing is left behind.
func (a *Agent) reconcileWorktrees(ctx context.Context) {
	entries, err := os.ReadDir(a.worktreeRoot())
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(a.worktreeRoot(), name))
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			if _, err := os.Stat(a.worktreeRecord(name)); os.IsNotExist(err) && e.IsDir() {
				// A directory without a record is never one we handed out.
				_ = os.RemoveAll(filepath.Join(a.worktreeRoot(), name))
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(a.worktreeRoot(), name))
		var t isolated
		if err != nil || json.Unmarshal(b, &t) != nil || t.InstanceID != id {
			a.log.Warn().Str("record", name).Msg("unreadable worktree record removed")
			_ = os.Remove(filepath.Join(a.worktreeRoot(), name))
			continue
		}
		if in := a.lookup(id); in != nil && in.running() {
			in.mu.Lock()
			in.tree = &t
			in.mu.Unlock()
			continue
		}
		a.salvage(ctx, &t)
	}
}

// salvage commits what the worktree holds on its branch (if anything) and
// removes the worktree; a branch with nothing beyond its base goes too.
func (a *Agent) salvage(ctx context.Context, t *isolated) {
	keep := t.Delivered == transport.DeliverBranch || t.Delivered == transport.DeliverMerge
	if _, err := os.Stat(t.Dir); err == nil {
		if changed, err := a.git.Changed(ctx, t.Tree); err == nil && changed {
			if _, err := a.git.Commit(ctx, t.Tree, "pifleet: work left by instance "+t.InstanceID+" (its worker ended)", a.author()); err == nil {
				keep = true
			} else {
				a.log.Warn().Err(err).Str("instanceId", t.InstanceID).Msg("leftover work not committed")
			}
		}
		if head, err := a.git.Head(ctx, t.Tree); err == nil && head != t.Base {
			keep = true
		}
	}
	a.log.Info().Str("instanceId", t.InstanceID).Str("branch", t.Branch).Bool("branchKept", keep).Msg("worktree of an ended worker removed")
	a.dropWorktree(ctx, t, !keep)
}

// author is who delivery commits are by.
func (a *Agent) author() worktree.Identity {
	return worktree.Identity{Name: a.cfg.DeliveryAuthorName, Email: a.cfg.DeliveryAuthorEmail}
}

// worktreeInfo is the tree as list reports it (in.mu held).
func (in *instance) worktreeInfoLocked() *transport.WorktreeInfo {
	if in.tree == nil {
		return nil
	}
	t := in.tree
	return &transport.WorktreeInfo{Repo: t.Repo, Path: t.Dir, Branch: t.Branch, Base: t.Base, BaseRef: t.BaseRef}
}

func (in *instance) isolation() *isolated {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.tree == nil {
		return nil
	}
	c := *in.tree
	return &c
}

// addWorktreeStat puts the branch, base and diff size of an isolated
// worker into its task_done.
func (a *Agent) addWorktreeStat(f *transport.TaskDoneFrame) {
	in := a.lookup(f.InstanceID)
	if in == nil {
		return
	}
	t := in.isolation()
	if t == nil {
		return
	}
	ws := &transport.WorktreeStat{Branch: t.Branch, Base: t.Base}
	if st, err := a.git.Stat(a.runCtx, t.Tree); err == nil {
		ws.Files, ws.Insertions, ws.Deletions = float64(st.Files), float64(st.Insertions), float64(st.Deletions)
	} else {
		in.log.Warn().Err(err).Msg("no diff stat for the task")
	}
	f.Worktree = ws
}

// nameBranch gives a provisional branch its task's name,
// pifleet/<taskId>-<slug of the prompt>, when the first task arrives.
func (a *Agent) nameBranch(in *instance, taskID string, command json.RawMessage) {
	in.mu.Lock()
	t := in.tree
	if t == nil || !t.Provisional {
		in.mu.Unlock()
		return
	}
	var cmd struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(command, &cmd)
	slug := session.Slugify(cmd.Message)
	if slug == "" {
		slug = "untitled"
	}
	name := "pifleet/" + sanitizeRef(taskID) + "-" + slug
	next := *t
	if err := a.git.Rename(a.runCtx, t.Tree, name); err != nil {
		in.mu.Unlock()
		in.log.Warn().Err(err).Str("branch", name).Msg("branch keeps its spawn-time name")
		return
	}
	next.Branch, next.Provisional = name, false
	in.tree = &next
	in.mu.Unlock()
	if err := a.saveWorktree(&next); err != nil {
		in.log.Error().Err(err).Msg("worktree record not updated")
	}
}

// sanitizeRef keeps the characters a branch name may hold.
func sanitizeRef(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// baseDiff answers fs_diff {base:true}: the isolated worker's changes
// against the commit it started from.
func (a *Agent) baseDiff(ctx context.Context, in *instance, f *transport.FsDiffFrame) *transport.FsResultFrame {
	out := &transport.FsResultFrame{Done: true}
	t := in.isolation()
	if t == nil {
		out.Error = &transport.FsError{Code: CodeNotIsolated, Message: "instance " + in.id + " has no worktree"}
		return out
	}
	text, err := a.git.Diff(ctx, t.Tree, f.Stat)
	if err != nil {
		out.Error = &transport.FsError{Code: CodeGitFailed, Message: err.Error()}
		return out
	}
	if len(text) > maxPatchBytes {
		text, out.Truncated = text[:maxPatchBytes], true
	}
	text = strings.ToValidUTF8(text, "\uFFFD")
	out.Text = &text
	return out
}

// deliverRequest is a delivery of a task's work.
type deliverRequest struct {
	taskID          string
	mode            transport.DeliveryMode
	target, message string
}

// deliverWork delivers the task's work from the instance's worktree:
// branch (committed on its branch), patch (committed, returned as git
// format-patch text), merge (committed and merged into the target). A
// conflict changes nothing: the task stays reviewable.
func (a *Agent) deliverWork(ctx context.Context, in *instance, r deliverRequest) (*transport.DeliveredFrame, error) {
	t := in.isolation()
	if t == nil {
		return nil, &worktree.Error{Code: CodeNotIsolated, Message: "instance " + in.id + " has no worktree to deliver from"}
	}
	msg := r.message
	if msg == "" {
		msg = "pifleet task " + r.taskID
		if t.Branch != "" && !t.Provisional {
			msg += " (" + strings.TrimPrefix(t.Branch, "pifleet/") + ")"
		}
	}
	out := &transport.DeliveredFrame{TaskID: r.taskID, Mode: r.mode, Branch: t.Branch}
	switch r.mode {
	case transport.DeliverBranch, transport.DeliverPatch, transport.DeliverMerge:
	default:
		return nil, &worktree.Error{Code: CodeDeliverUnsupported, Message: fmt.Sprintf("deliver %q is not supported (branch, patch, merge or none)", r.mode)}
	}
	head, err := a.git.Commit(ctx, t.Tree, msg, a.author())
	if err != nil {
		return nil, err
	}
	out.Commit = head
	switch r.mode {
	case transport.DeliverPatch:
		p, err := a.git.FormatPatch(ctx, t.Tree)
		if err != nil {
			return nil, err
		}
		if len(p) > maxPatchBytes {
			return nil, &worktree.Error{Code: CodePatchTooLarge, Message: fmt.Sprintf("the patch is %d bytes, more than a frame holds: deliver it as a branch", len(p))}
		}
		out.Patch = p
	case transport.DeliverMerge:
		target := r.target
		if target == "" {
			target = t.BaseRef
		}
		scratch := filepath.Join(a.worktreeRoot(), in.id+"-merge")
		m, err := a.git.Merge(ctx, t.Tree, target, scratch, "Merge "+t.Branch+": "+msg, a.author())
		if err != nil {
			return nil, err
		}
		out.Commit, out.Target = m, target
	}
	in.mu.Lock()
	if in.tree != nil {
		in.tree.Delivered = r.mode
		t = in.tree
	}
	in.mu.Unlock()
	if err := a.saveWorktree(t); err != nil {
		in.log.Error().Err(err).Msg("worktree record not updated")
	}
	return out, nil
}

// deliverFrame answers deliver.
func (a *Agent) deliverFrame(ctx context.Context, f *transport.DeliverFrame) transport.Frame {
	in := a.lookup(f.InstanceID)
	if in == nil {
		if id := a.taskInstance(f.TaskID); id != "" {
			in = a.lookup(id)
		}
	}
	if in == nil {
		return errorFrame(f, CodeUnknownTask, "no task "+f.TaskID)
	}
	out, err := a.deliverWork(ctx, in, deliverRequest{taskID: f.TaskID, mode: f.Mode, target: f.Target, message: f.Message})
	if err != nil {
		return deliveryError(f, err)
	}
	out.ID = f.ID
	if !in.running() {
		a.retireWorktree(ctx, in)
	}
	return out
}

func deliveryError(req transport.Frame, err error) transport.Frame {
	var we *worktree.Error
	if errors.As(err, &we) {
		return errorFrame(req, we.Code, we.Message)
	}
	return errorFrame(req, CodeGitFailed, err.Error())
}

// stopIsolated answers stop; an isolated worker whose work was delivered
// has nothing left in its worktree, which goes with it (an undelivered
// one stays for review).
func (a *Agent) stopIsolated(ctx context.Context, f *transport.StopFrame) transport.Frame {
	out := a.stop(ctx, f, f.InstanceID)
	if in := a.lookup(f.InstanceID); in != nil {
		if t := in.isolation(); t != nil && t.Delivered != "" && !in.running() {
			a.retireWorktree(ctx, in)
		}
	}
	return out
}

// retireWorktree removes the worktree of an instance whose worker ended:
// the branch stays when it was delivered as a branch or merged.
func (a *Agent) retireWorktree(ctx context.Context, in *instance) {
	in.mu.Lock()
	t := in.tree
	in.tree = nil
	in.mu.Unlock()
	if t == nil {
		return
	}
	keep := t.Delivered == transport.DeliverBranch || t.Delivered == transport.DeliverMerge
	a.dropWorktree(ctx, t, !keep)
}
