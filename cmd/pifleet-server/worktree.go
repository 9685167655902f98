package main

import (
	"context"
	"fmt"
	"io"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/transport"
)

// TaskDiff is the task's change against its base.
func (b *fleetBackend) TaskDiff(ctx context.Context, taskID string, stat bool) (controlapi.FileResult, error) {
	t, err := b.task(taskID)
	if err != nil {
		return controlapi.FileResult{}, err
	}
	return b.file(t.Info().InstanceID, func(in *fleet.Instance) (fleet.FileResult, error) {
		return in.Diff(ctx, fleet.DiffOptions{Base: true, Stat: stat})
	})
}

// Deliver delivers the task's work.
func (b *fleetBackend) Deliver(ctx context.Context, taskID string, req controlapi.DeliverRequest) (controlapi.Delivery, error) {
	t, err := b.task(taskID)
	if err != nil {
		return controlapi.Delivery{}, err
	}
	// A client that goes away does not leave a merge half done.
	d, err := t.Deliver(context.WithoutCancel(ctx), fleet.DeliverOptions{Mode: transport.DeliveryMode(req.Mode), Target: req.Target, Message: req.Message})
	if err != nil {
		return controlapi.Delivery{}, apiError(err)
	}
	return deliveryOf(&d), nil
}

func deliveryOf(d *fleet.Delivery) controlapi.Delivery {
	return controlapi.Delivery{Mode: string(d.Mode), Branch: d.Branch, Commit: d.Commit, Target: d.Target, Patch: d.Patch}
}

// worktreeFieldsOf fills a task's branch, base, diff stat and delivery.
func worktreeFieldsOf(ct *controlapi.Task, t fleet.TaskInfo) {
	if d := t.LastDone; d != nil && d.Worktree != nil {
		ct.Branch, ct.Base = d.Worktree.Branch, d.Worktree.Base
		ct.DiffStat = &controlapi.DiffStat{Files: d.Worktree.Files, Insertions: d.Worktree.Insertions, Deletions: d.Worktree.Deletions}
	}
	if t.Delivery != nil {
		d := deliveryOf(t.Delivery)
		ct.Delivery = &d
		if ct.Branch == "" {
			ct.Branch = d.Branch
		}
	}
}

// DeliverCmd is `deliver`.
type DeliverCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Task     string `arg:"" help:"Task id (of a worker spawned with --isolate)."`
	Mode     string `arg:"" help:"branch (commit the work on the worker's branch), patch (commit it and print it as a git format-patch), or merge (commit it and merge it into --target)." enum:"branch,patch,merge"`
	Target   string `help:"Branch a merge goes into (default: the branch the worktree started from)." env:"PIFLEET_DELIVER_TARGET"`
	Message  string `help:"Commit message (default: derived from the task)." env:"PIFLEET_DELIVER_MESSAGE"`
}

// Run delivers and prints the branch and commit (the patch itself for
// patch, ready for git am).
func (c *DeliverCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		d, err := cl.Deliver(ctx, c.Task, controlapi.DeliverRequest{Mode: c.Mode, Target: c.Target, Message: c.Message})
		if err != nil {
			return err
		}
		switch {
		case c.JSON:
			return printJSON(out.Out, d)
		case d.Mode == "patch":
			_, err := io.WriteString(out.Out, d.Patch)
			return err
		case d.Mode == "merge":
			_, err := fmt.Fprintf(out.Out, "merged %s into %s at %s\n", d.Branch, d.Target, short(d.Commit))
			return err
		default:
			_, err := fmt.Fprintf(out.Out, "committed on %s at %s\n", d.Branch, short(d.Commit))
			return err
		}
	})
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
