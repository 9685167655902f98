package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/termsafe"
)

// TrustCmd groups the trust commands.
type TrustCmd struct {
	List TrustListCmd `cmd:"" help:"List the stored trust decisions."`
	Set  TrustSetCmd  `cmd:"" help:"Record a machine's policy: allow (view, spawn), steer (everything), deny."`
}

// TrustListCmd is `trust list`.
type TrustListCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
}

// Run lists the decisions.
func (c *TrustListCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		ds, err := cl.TrustList(ctx)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, ds)
		}
		if len(ds) == 0 {
			_, err := fmt.Fprintln(out.Out, "no trust decisions")
			return err
		}
		tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MACHINE\tPOLICY\tDECIDED\tUSER\tKEY")
		for _, d := range ds {
			decided := "-"
			if !d.DecidedAt.IsZero() {
				decided = d.DecidedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termsafe.Clean(d.Machine), d.Policy, decided, dash(termsafe.Clean(d.User)), dash(termsafe.Clean(d.Key)))
		}
		return tw.Flush()
	})
}

// TrustSetCmd is `trust set`.
type TrustSetCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Machine  string `arg:"" help:"Machine name (as whois reports it)."`
	Policy   string `arg:"" help:"allow, steer or deny." enum:"allow,steer,deny"`
}

// Run records the decision.
func (c *TrustSetCmd) Run(out *Output) error {
	return simple(&c.APIFlags, c.JSON, out, fmt.Sprintf("%s: %s", c.Machine, c.Policy), map[string]any{"machine": c.Machine, "policy": c.Policy}, func(ctx context.Context, cl *controlapi.Client) error {
		_, err := cl.TrustSet(ctx, c.Machine, controlapi.Policy(c.Policy))
		return err
	})
}

// RetryCmd is `retry`.
type RetryCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Agent    string `arg:"" help:"Agent name (as in status)."`
}

// Run asks the server to dial the agent now.
func (c *RetryCmd) Run(out *Output) error {
	return simple(&c.APIFlags, c.JSON, out, "dialling "+c.Agent+" now (status shows the outcome)",
		map[string]any{"agent": c.Agent, "retrying": true}, func(ctx context.Context, cl *controlapi.Client) error {
			return cl.Retry(ctx, c.Agent)
		})
}
