package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"example.com/pifleet/fleet/controlapi"
)

// SessionsCmd groups the session-registry commands; `sessions` alone
// lists.
type SessionsCmd struct {
	List   SessionsListCmd   `cmd:"" default:"withargs" help:"List the sessions of the registry (the default)."`
	Search SessionsSearchCmd `cmd:"" help:"Search the contents of the agents' sessions."`
}

// SessionsListCmd is `sessions [list]`.
type SessionsListCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`

	Machine string `help:"Only the sessions of this agent." env:"PIFLEET_SESSIONS_MACHINE"`
	Kind    string `help:"Only sessions of this kind: baseline, task or scratch." env:"PIFLEET_SESSIONS_KIND" placeholder:"KIND"`
}

// Run lists the sessions; the server checks the baselines' repositories
// first, so the stale flags are current.
func (c *SessionsListCmd) Run(out *Output) error {
	kind := controlapi.SessionKind(c.Kind)
	if !kind.Valid() {
		return fmt.Errorf("--kind %q is not baseline, task or scratch", c.Kind)
	}
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		ss, err := cl.Sessions(ctx, controlapi.SessionFilter{Machine: c.Machine, Kind: kind})
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, ss)
		}
		return writeSessions(out, ss)
	})
}

func writeSessions(out *Output, ss []controlapi.Session) error {
	if len(ss) == 0 {
		_, err := fmt.Fprintln(out.Out, "no sessions")
		return err
	}
	tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tKIND\tNAME\tPINNED\tUPDATED\tINSTANCE\tSTALE\tPATH")
	unsynced := map[string]string{}
	var machines []string
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Machine, s.Kind, dash(s.Name), yesNo(s.Pinned), updated(s.UpdatedAt),
			dash(s.AttachedInstanceID), staleFlag(s), s.Path)
		if s.Registry != "" && s.Registry != "synced" {
			if _, seen := unsynced[s.Machine]; !seen {
				machines = append(machines, s.Machine)
			}
			unsynced[s.Machine] = s.Registry
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range machines {
		fmt.Fprintf(out.Err, "note: the sessions of %s may be out of date (its registry is %s)\n", m, unsynced[m])
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// staleFlag is STALE for a baseline whose repository moved on, no for
// another baseline, and - for sessions that are not baselines.
func staleFlag(s controlapi.Session) string {
	switch {
	case s.Kind != controlapi.KindBaseline:
		return "-"
	case s.StaleBaseline:
		return "STALE"
	}
	return "no"
}

func updated(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}

// SessionsSearchCmd is `sessions search`.
type SessionsSearchCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`

	Machine string `help:"Search only this agent (default: every connected agent)." env:"PIFLEET_SESSIONS_MACHINE"`
	Cwd     string `help:"Search only the sessions of this working directory." env:"PIFLEET_SESSIONS_CWD" placeholder:"DIR"`
	Query   string `arg:"" help:"Text to look for."`
}

// Run searches and prints the hits; agents that could not be searched are
// named on stderr.
func (c *SessionsSearchCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		res, err := cl.SearchSessions(ctx, controlapi.SessionSearch{Query: c.Query, Machine: c.Machine, Cwd: c.Cwd})
		if err != nil {
			return err
		}
		for _, f := range res.Failed {
			fmt.Fprintf(out.Err, "warning: %s not searched: %v\n", f.Machine, f.Error)
		}
		if c.JSON {
			return printJSON(out.Out, res)
		}
		if len(res.Hits) == 0 {
			_, err := fmt.Fprintln(out.Out, "no hits")
			return err
		}
		tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MACHINE\tSESSION\tPATH\tSNIPPET")
		for _, h := range res.Hits {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", h.Machine, h.SessionID, h.Path, snippetAround(h.Snippet, c.Query, 80))
		}
		return tw.Flush()
	})
}

// snippetAround shortens a hit's snippet to one line of at most n runes
// around the first match of query (ignoring case), so that the match
// shows even in a long snippet.
func snippetAround(snippet, query string, n int) string {
	line := strings.Join(strings.Fields(snippet), " ")
	runes := []rune(line)
	if len(runes) <= n {
		return line
	}
	// Lowering rune by rune keeps the rune count, so indexes match.
	lower := strings.Map(unicode.ToLower, line)
	q := strings.Map(unicode.ToLower, strings.Join(strings.Fields(query), " "))
	bi := strings.Index(lower, q)
	if q == "" || bi < 0 {
		return oneLine(line, n)
	}
	at, qlen := utf8.RuneCountInString(lower[:bi]), utf8.RuneCountInString(q)
	width := n - 2 // room for an ellipsis on each side
	start := max(0, at-max(0, width-qlen)/2)
	end := min(len(runes), start+width)
	start = max(0, end-width)
	out := string(runes[start:end])
	if start > 0 {
		out = "…" + out
	}
	if end < len(runes) {
		out += "…"
	}
	return out
}

// BaselineCmd groups the baseline commands.
type BaselineCmd struct {
	Create BaselineCreateCmd `cmd:"" help:"Prime a pinned baseline session for a repository: tasks then start from a copy of it."`
}

// BaselineCreateCmd is `baseline create`.
type BaselineCreateCmd struct {
	APIFlags    `embed:""`
	TimeoutFlag `embed:""`
	JSONFlag    `embed:""`

	Agent          string        `help:"Agent whose machine holds the repository." required:"" env:"PIFLEET_BASELINE_AGENT"`
	Cwd            string        `help:"The repository's directory on the agent's machine." required:"" env:"PIFLEET_BASELINE_CWD"`
	Bundle         string        `help:"Bundle of the priming worker (tasks from the baseline use it too unless they name another)." required:"" env:"PIFLEET_BASELINE_BUNDLE"`
	Prompt         string        `help:"Priming prompt (default: explore the repository and summarise it); - reads standard input." env:"PIFLEET_BASELINE_PROMPT"`
	Repo           string        `help:"Names the baseline baseline:REPO (default: the base name of --cwd)." env:"PIFLEET_BASELINE_REPO"`
	Model          string        `help:"Override the bundle's model: provider/id." env:"PIFLEET_BASELINE_MODEL" placeholder:"PROVIDER/ID"`
	SettleTimeout  time.Duration `help:"Bound on the priming run (default: the server's, 15m)." env:"PIFLEET_BASELINE_SETTLE_TIMEOUT"`
	CompactTimeout time.Duration `help:"Bound on the compaction (default: the server's, 5m)." env:"PIFLEET_BASELINE_COMPACT_TIMEOUT"`
}

// Run creates the baseline and prints its name, path, git HEAD and
// whether it was compacted.
func (c *BaselineCreateCmd) Run(out *Output) error {
	req := controlapi.BaselineRequest{Agent: c.Agent, Cwd: c.Cwd, Bundle: c.Bundle, Repo: c.Repo,
		SettleTimeoutSeconds: c.SettleTimeout.Seconds(), CompactTimeoutSeconds: c.CompactTimeout.Seconds()}
	if c.Prompt != "" {
		p, err := textArg(c.Prompt)
		if err != nil {
			return err
		}
		req.Prompt = p
	}
	if c.Model != "" {
		m, err := controlapi.ParseModelRef(c.Model)
		if err != nil {
			return err
		}
		req.Model = &m
	}
	if c.SettleTimeout < 0 || c.CompactTimeout < 0 {
		return errors.New("baseline timeouts cannot be negative")
	}
	return c.withClientWithin(c.Timeout, "the baseline", func(ctx context.Context, cl *controlapi.Client) error {
		b, err := cl.CreateBaseline(ctx, req)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, b)
		}
		head := b.GitHead
		if head == "" {
			head = "- (not a git repository: never stale)"
		}
		tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "%s\n", b.Name)
		fmt.Fprintf(tw, "path\t%s\n", b.Path)
		fmt.Fprintf(tw, "gitHead\t%s\n", head)
		fmt.Fprintf(tw, "compacted\t%s\n", yesNo(b.Compacted))
		return tw.Flush()
	})
}

// ResumeCmd is `resume`.
type ResumeCmd struct {
	APIFlags    `embed:""`
	TimeoutFlag `embed:""`
	JSONFlag    `embed:""`

	Attach   bool              `help:"Append to the session itself instead of a copy (refused for a pinned baseline, and while another worker writes it)." env:"PIFLEET_RESUME_ATTACH"`
	Bundle   string            `help:"Bundle of the worker (default: the one the session's record names)." env:"PIFLEET_RESUME_BUNDLE"`
	Machine  string            `help:"Look the session up on this agent only." env:"PIFLEET_RESUME_MACHINE"`
	Model    string            `help:"Override the bundle's model: provider/id." env:"PIFLEET_RESUME_MODEL" placeholder:"PROVIDER/ID"`
	Env      map[string]string `help:"Extra environment of the worker (KEY=VALUE;…)." env:"PIFLEET_RESUME_ENV" mapsep:";"`
	Progress string            `help:"Provisioning progress on stderr: auto (on a terminal), always, never." default:"auto" enum:"auto,always,never" env:"PIFLEET_PROGRESS"`
	Session  string            `arg:"" help:"The session: its path, its session id or its name (baseline:api, task:t42:fix-tests)."`
}

// Run resumes and prints the new instance id.
func (c *ResumeCmd) Run(out *Output) error {
	req := controlapi.ResumeRequest{Session: c.Session, Machine: c.Machine, Bundle: c.Bundle, Env: c.Env}
	if c.Attach {
		req.Mode = controlapi.SessionAttach
	}
	if c.Model != "" {
		m, err := controlapi.ParseModelRef(c.Model)
		if err != nil {
			return err
		}
		req.Model = &m
	}
	return c.withClientWithin(c.Timeout, "the worker to start", func(ctx context.Context, cl *controlapi.Client) error {
		pr := newProgressPrinter(out, c.Progress)
		res, err := cl.Resume(ctx, req, pr.print)
		pr.done()
		if err != nil {
			return err
		}
		return printSpawned(out, res, c.JSON)
	})
}

// printSpawned prints a spawned instance: its id alone on stdout (for
// scripts), and on stderr a warning when it started from a stale
// baseline.
func printSpawned(out *Output, res controlapi.SpawnResult, asJSON bool) error {
	if res.StaleBaseline {
		fmt.Fprintf(out.Err, "warning: stale baseline: the repository of %s has moved on since it was primed; the worker starts from it anyway\n", res.FromSession)
	}
	if asJSON {
		return printJSON(out.Out, res)
	}
	_, err := fmt.Fprintln(out.Out, res.InstanceID)
	return err
}

// fromLabel describes what an instance started from, for the status
// table: the session's name when it is a listed baseline, else its file
// name; its mode; and the stale flag.
func fromLabel(in controlapi.Instance, baselines []controlapi.Session) string {
	if in.FromSession == "" {
		return "-"
	}
	name := filepath.Base(in.FromSession)
	for _, b := range baselines {
		if b.Path == in.FromSession && b.Name != "" {
			name = b.Name
		}
	}
	mode := in.SessionMode
	if mode == "" {
		mode = controlapi.SessionClone
	}
	label := fmt.Sprintf("%s (%s)", name, mode)
	if in.StaleBaseline {
		label += " STALE"
	}
	return label
}

// writeBaselineTable is the baselines section of status.
func writeBaselineTable(w io.Writer, bs []controlapi.Session) {
	if len(bs) == 0 {
		fmt.Fprintln(w, "no baselines")
		return
	}
	fmt.Fprintln(w, "BASELINE\tMACHINE\tGITHEAD\tSTALE\tUPDATED\tPATH")
	for _, b := range bs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", dash(b.Name), b.Machine, dash(shortHead(b.GitHead)), staleFlag(b), updated(b.UpdatedAt), b.Path)
	}
}

// shortHead abbreviates a commit id as git does.
func shortHead(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
