package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"example.com/pifleet/fleet/controlapi"
)

// TasksCmd is `tasks`.
type TasksCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
}

// Run lists the tasks.
func (c *TasksCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		ts, err := cl.Tasks(ctx)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, ts)
		}
		tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
		if err := writeTaskTable(tw, ts); err != nil {
			return err
		}
		return tw.Flush()
	})
}

// AcceptCmd is `accept`.
type AcceptCmd struct {
	APIFlags    `embed:""`
	JSONFlag    `embed:""`
	Disposition string `help:"What happens to the worker: stop, or keep_idle for the next task." default:"keep_idle" enum:"stop,keep_idle" env:"PIFLEET_DISPOSITION"`
	Deliver     string `help:"First deliver an isolated task's work: branch, patch, merge (see deliver), or none. A failed delivery (a merge conflict) leaves the task under review." default:"none" enum:"none,branch,patch,merge" env:"PIFLEET_DELIVER"`
	Target      string `help:"With --deliver merge: the branch to merge into (default: the one the worktree started from)." env:"PIFLEET_DELIVER_TARGET"`
	Task        string `arg:"" help:"Task id."`
}

// Run accepts the task.
func (c *AcceptCmd) Run(out *Output) error {
	return simple(&c.APIFlags, c.JSON, out, fmt.Sprintf("accepted %s (%s)", c.Task, c.Disposition), map[string]any{"taskId": c.Task, "accepted": true, "disposition": c.Disposition}, func(ctx context.Context, cl *controlapi.Client) error {
		return cl.AcceptWith(ctx, c.Task, controlapi.AcceptRequest{Disposition: controlapi.Disposition(c.Disposition), Deliver: c.Deliver, Target: c.Target})
	})
}

// RejectCmd is `reject`.
type RejectCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Task     string `arg:"" help:"Task id."`
	Feedback string `arg:"" help:"What to change; the worker gets it as its next prompt. - reads standard input."`
}

// Run rejects the task.
func (c *RejectCmd) Run(out *Output) error {
	feedback, err := textArg(c.Feedback)
	if err != nil {
		return err
	}
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		res, err := cl.Reject(ctx, c.Task, feedback)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, res)
		}
		if res.Escalated {
			_, err = fmt.Fprintf(out.Out, "rejected %s: too many rejections, escalated to a human\n", c.Task)
			return err
		}
		_, err = fmt.Fprintf(out.Out, "rejected %s: the worker is revising\n", c.Task)
		return err
	})
}
