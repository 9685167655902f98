package fleet

import (
	"context"
	"errors"
	"fmt"

	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// Isolation asks for a worker in a git worktree of its own: the agent
// makes a worktree of the repository Cwd is in, on a new branch, and runs
// the worker there, so that parallel workers on one repository never
// touch each other's files or the user's own working tree.
type Isolation struct {
	// Branch names the new branch (default pifleet/<taskId>-<slug>, from
	// the first task's id and prompt).
	Branch string
	// Base is the ref the branch starts from (default HEAD, which must be
	// on a branch with no uncommitted changes: they would be missing from
	// the worktree; the agent refuses the spawn otherwise).
	Base string
}

func (iso *Isolation) frame() *transport.Isolation {
	if iso == nil {
		return nil
	}
	return &transport.Isolation{Mode: transport.IsolationWorktree, Branch: iso.Branch, Base: iso.Base}
}

// checkIsolation refuses isolation on an agent that does not announce it
// (a TypeScript agent would ignore the field). f.mu held.
func checkIsolation(a *agentState, iso *Isolation) error {
	if iso == nil {
		return nil
	}
	if !a.pifleet || !a.announces(transport.CapabilityWorktree) {
		return fmt.Errorf("%w: %s cannot run isolated workers (worktree)", ErrNotSupported, a.name)
	}
	return nil
}

// Worktree is an isolated worker's git worktree.
type Worktree struct {
	// Repo is the repository (the user's own tree); Path the worktree.
	Repo, Path string
	Branch     string
	// Base is the commit the branch started from; BaseRef the branch it
	// was taken from, when it was one (the default target of a merge).
	Base, BaseRef string
}

// Worktree returns the instance's worktree (ok false when it runs in a
// shared cwd).
func (i *Instance) Worktree() (Worktree, bool) {
	i.f.core.mu.RLock()
	defer i.f.core.mu.RUnlock()
	inst := i.f.core.instance(i.id)
	if inst == nil || inst.rec.Worktree == nil {
		return Worktree{}, false
	}
	w := inst.rec.Worktree
	return Worktree{Repo: w.Repo, Path: w.Path, Branch: w.Branch, Base: w.Base, BaseRef: w.BaseRef}, true
}

// DiffStat is the size of an isolated task's change against its base.
type DiffStat struct {
	Branch, Base                 string
	Files, Insertions, Deletions int
}

func diffStatOf(d *serverstore.DiffStat) *DiffStat {
	if d == nil {
		return nil
	}
	return &DiffStat{Branch: d.Branch, Base: d.Base, Files: d.Files, Insertions: d.Insertions, Deletions: d.Deletions}
}

// Diff is the task's change: its worker's worktree against the commit
// the branch started from, new files included (stat: git diff --stat).
func (t *Task) Diff(ctx context.Context, stat bool) (FileResult, error) {
	t.f.core.mu.RLock()
	tk := t.f.core.task(t.id)
	var id string
	if tk != nil {
		id = tk.rec.InstanceID
	}
	t.f.core.mu.RUnlock()
	if tk == nil {
		return FileResult{}, fmt.Errorf("%w: %q", ErrUnknownTask, t.id)
	}
	return (&Instance{f: t.f, id: id}).Diff(ctx, DiffOptions{Base: true, Stat: stat})
}

// DeliverOptions say how to deliver a task's work.
type DeliverOptions struct {
	// Mode is branch (the work committed on the worker's branch), patch
	// (committed, and returned as git format-patch text) or merge
	// (committed and merged into Target).
	Mode transport.DeliveryMode
	// Target is the branch a merge goes into (default: the branch the
	// worktree started from).
	Target string
	// Message is the commit message (default: derived from the task).
	Message string
}

// Delivery is how a task's work was delivered.
type Delivery struct {
	Mode   transport.DeliveryMode
	Branch string
	// Commit is the branch's head after the delivery commit, or the merge
	// commit of a merge (into Target).
	Commit, Target string
	// Patch is the git format-patch text of a patch delivery.
	Patch string
}

// ErrDelivery: the agent could not deliver the work; nothing changed and
// the task is still under review. A *DeliveryError carries the code.
var ErrDelivery = errors.New("fleet: delivery failed")

// ErrMergeConflict: a merge delivery conflicts (errors.Is on a
// *DeliveryError with code merge_conflict).
var ErrMergeConflict = errors.New("fleet: merge conflict")

// ErrBadDeliveryMode is matched by every *DeliveryModeError.
var ErrBadDeliveryMode = errors.New("fleet: unknown delivery mode")

// DeliveryModeError names a Deliver mode that is none of branch, patch,
// merge; nothing was sent to the agent.
type DeliveryModeError struct {
	Mode transport.DeliveryMode
}

func (e *DeliveryModeError) Error() string {
	return fmt.Sprintf("fleet: delivery mode %q is none of %s, %s or %s", e.Mode, transport.DeliverBranch, transport.DeliverPatch, transport.DeliverMerge)
}

// Is makes errors.Is(err, ErrBadDeliveryMode) true.
func (e *DeliveryModeError) Is(target error) bool { return target == ErrBadDeliveryMode }

// DeliveryError is a delivery the agent refused or could not do: codes
// merge_conflict, target_dirty (the target is checked out with changes),
// no_target, not_isolated, patch_too_large, deliver_unsupported,
// git_failed.
type DeliveryError struct {
	TaskID, Code, Message string
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("fleet: delivery of task %s failed (%s): %s", e.TaskID, e.Code, e.Message)
}

// Is matches ErrDelivery, and ErrMergeConflict for a conflict.
func (e *DeliveryError) Is(target error) bool {
	return target == ErrDelivery || (target == ErrMergeConflict && e.Code == "merge_conflict")
}

// Deliver delivers the work of the task's isolated worker (trust policy
// steer): it is recorded with the task (TaskInfo.Delivery). It may be
// called while the task is under review, before Accept, and again with
// another mode. A failure changes nothing; a mode that is none of branch,
// patch, merge is a *DeliveryModeError (ErrBadDeliveryMode).
func (t *Task) Deliver(ctx context.Context, opts DeliverOptions) (Delivery, error) {
	f := t.f
	switch opts.Mode {
	case transport.DeliverBranch, transport.DeliverPatch, transport.DeliverMerge:
	default:
		return Delivery{}, &DeliveryModeError{Mode: opts.Mode}
	}
	f.mu.Lock()
	tk := f.core.task(t.id)
	if tk == nil {
		f.mu.Unlock()
		return Delivery{}, fmt.Errorf("%w: %q", ErrUnknownTask, t.id)
	}
	inst, a, c, err := f.lookupLocked(tk.rec.InstanceID, trust.OpSteer)
	if err == nil && inst.rec.Worktree == nil {
		err = &DeliveryError{TaskID: t.id, Code: "not_isolated", Message: "the task's worker has no worktree (spawn it with Isolation)"}
	}
	if err == nil {
		err = checkIsolation(a, &Isolation{})
	}
	f.mu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	fr := &transport.DeliverFrame{Header: transport.Header{TraceID: tk.rec.TraceID}, TaskID: t.id,
		InstanceID: inst.id, Mode: opts.Mode, Target: opts.Target, Message: opts.Message}
	ans, err := c.Request(ctx, fr)
	var re *transport.RemoteError
	if errors.As(err, &re) {
		return Delivery{}, &DeliveryError{TaskID: t.id, Code: re.Code, Message: re.Message}
	}
	if err != nil {
		return Delivery{}, err
	}
	d, ok := ans.(*transport.DeliveredFrame)
	if !ok {
		return Delivery{}, wrongAnswer("deliver", (*transport.DeliveredFrame)(nil), ans)
	}
	out := Delivery{Mode: d.Mode, Branch: d.Branch, Commit: d.Commit, Target: d.Target, Patch: d.Patch}
	var written *serverstore.Pending
	f.mu.Lock()
	if tk := f.core.task(t.id); tk != nil {
		tk.rec.Delivery = &serverstore.WorkDelivery{Mode: string(d.Mode), Branch: d.Branch, Commit: d.Commit, Target: d.Target, Patch: d.Patch}
		written = f.persistTaskLocked(tk)
		f.publishLocked(Change{Kind: ChangeTaskState, Agent: inst.agent, InstanceID: inst.id, TaskID: t.id,
			From: tk.rec.State, To: tk.rec.State, Message: "delivered as " + string(d.Mode)})
	}
	f.mu.Unlock()
	if written != nil {
		if err := f.waitWritten(written); err != nil {
			return out, err
		}
	}
	return out, nil
}
