package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/termsafe"
)

// StatusCmd is `status`.
type StatusCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
}

// Run prints agents, instances, tasks and baselines.
func (c *StatusCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		st, err := cl.Status(ctx)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, st)
		}
		return writeStatus(out.Out, st)
	})
}

func writeStatus(w io.Writer, st controlapi.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(st.Agents) == 0 {
		fmt.Fprintln(tw, "no agents")
	} else {
		fmt.Fprintln(tw, "AGENT\tSTATE\tMACHINE\tPOLICY\tPLATFORM\tVERSION\tDETAIL")
		for _, a := range st.Agents {
			detail := a.Addr
			if a.LastError != "" && a.State != "connected" {
				detail = a.LastError
			}
			if a.State == "rejected" {
				detail += "; " + trustHint(a.Name)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.State, dash(a.Machine), dash(a.Policy), dash(a.Platform), dash(a.Version), dash(detail))
		}
	}
	fmt.Fprintln(tw)
	if len(st.Instances) == 0 {
		fmt.Fprintln(tw, "no instances")
	} else {
		fmt.Fprintln(tw, "INSTANCE\tAGENT\tSTATE\tBUNDLE\tMODEL\tTASK\tACTIVITY\tFROM\tCWD")
		for _, in := range st.Instances {
			model := "-"
			if in.Model != nil {
				model = in.Model.String()
			}
			if in.ModelPinned {
				model += " (pinned)"
			}
			state := in.State
			if in.Degraded {
				state += " (degraded)"
			}
			if n := len(in.PendingUI); n > 0 {
				state += fmt.Sprintf(" (%d dialog(s))", n)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, in.Agent, state, in.Bundle, model, dash(in.OpenTask),
				dash(in.Activity), fromLabel(in, st.Baselines), in.Cwd)
		}
	}
	if dialogs := pendingDialogs(st); len(dialogs) > 0 {
		fmt.Fprintln(tw)
		writeDialogTable(tw, dialogs)
	}
	fmt.Fprintln(tw)
	if err := writeTaskTable(tw, st.Tasks); err != nil {
		return err
	}
	fmt.Fprintln(tw)
	writeBaselineTable(tw, st.Baselines)
	return tw.Flush()
}

func writeTaskTable(tw *tabwriter.Writer, tasks []controlapi.Task) error {
	if len(tasks) == 0 {
		_, err := fmt.Fprintln(tw, "no tasks")
		return err
	}
	fmt.Fprintln(tw, "TASK\tINSTANCE\tSTATE\tREJECTS\tLAST\tPROMPT")
	for _, t := range tasks {
		last := "-"
		if t.LastDone != nil {
			last = t.LastDone.Status
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", t.ID, t.InstanceID, t.State, t.Rejects, t.MaxRejects, last, oneLine(t.Prompt, 50))
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine shortens s to one line of at most n runes, without terminal
// control sequences (the text may come from a worker).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(termsafe.Clean(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// clock formats a time for a readable line.
func clock(t time.Time) string {
	if t.IsZero() {
		return "--:--:--"
	}
	return t.Local().Format("15:04:05")
}

// pendingDialogs lists the dialogs waiting for an answer, oldest first.
func pendingDialogs(st controlapi.Status) []controlapi.UIRequest {
	var out []controlapi.UIRequest
	for _, in := range st.Instances {
		out = append(out, in.PendingUI...)
	}
	slices.SortStableFunc(out, func(a, b controlapi.UIRequest) int { return a.At.Compare(b.At) })
	return out
}

func writeDialogTable(tw *tabwriter.Writer, dialogs []controlapi.UIRequest) {
	fmt.Fprintln(tw, "DIALOG	INSTANCE	KIND	TITLE	MESSAGE	OPTIONS	UNTIL")
	for _, u := range dialogs {
		until := "-"
		if u.Deadline != nil {
			until = clock(*u.Deadline)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.ID, u.InstanceID, u.Kind, dash(oneLine(u.Title, 40)), dash(oneLine(u.Message, 60)),
			dash(oneLine(strings.Join(u.Options, ", "), 40)), until)
	}
	fmt.Fprintln(tw, "(answer with: pifleet-server ui answer DIALOG true|false|null|TEXT)")
}
