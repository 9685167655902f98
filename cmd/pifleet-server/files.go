package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/termsafe"
)

// ---- the backend: an instance's working tree through the agent ----

// Diff runs git diff in the instance's cwd.
func (b *fleetBackend) Diff(ctx context.Context, id string, q controlapi.DiffQuery) (controlapi.FileResult, error) {
	return b.file(id, func(in *fleet.Instance) (fleet.FileResult, error) {
		return in.Diff(ctx, fleet.DiffOptions{Ref: q.Ref, Staged: q.Staged, Stat: q.Stat, Base: q.Base})
	})
}

// ReadFile reads a file of the instance's cwd.
func (b *fleetBackend) ReadFile(ctx context.Context, id string, q controlapi.ReadQuery) (controlapi.FileResult, error) {
	return b.file(id, func(in *fleet.Instance) (fleet.FileResult, error) {
		return in.Read(ctx, q.Path, fleet.ReadOptions{Offset: q.Offset, Limit: q.Limit})
	})
}

// ListDir lists a directory of the instance's cwd.
func (b *fleetBackend) ListDir(ctx context.Context, id, path string) (controlapi.FileResult, error) {
	if path == "" {
		path = "."
	}
	return b.file(id, func(in *fleet.Instance) (fleet.FileResult, error) { return in.List(ctx, path) })
}

// Grep searches the instance's cwd.
func (b *fleetBackend) Grep(ctx context.Context, id string, q controlapi.GrepQuery) (controlapi.FileResult, error) {
	return b.file(id, func(in *fleet.Instance) (fleet.FileResult, error) { return in.Grep(ctx, q.Pattern, q.Glob) })
}

func (b *fleetBackend) file(id string, op func(*fleet.Instance) (fleet.FileResult, error)) (controlapi.FileResult, error) {
	in, err := b.instance(id)
	if err != nil {
		return controlapi.FileResult{}, err
	}
	res, err := op(in)
	if err != nil {
		var fe *fleet.FileError
		if errors.As(err, &fe) {
			// The agent answered: the request was wrong for this tree
			// (no such file, outside the cwd, not a repository).
			return controlapi.FileResult{}, &controlapi.Error{Code: controlapi.CodeFileError, Detail: fe.Code, Message: fe.Message}
		}
		return controlapi.FileResult{}, apiError(err)
	}
	out := controlapi.FileResult{Text: res.Text, Base64: res.Base64, Mime: res.Mime, Truncated: res.Truncated}
	for _, e := range res.Entries {
		fe := controlapi.FileEntry{Name: e.Name, Kind: string(e.Kind)}
		if e.Bytes != nil {
			n := int64(*e.Bytes)
			fe.Bytes = &n
		}
		out.Entries = append(out.Entries, fe)
	}
	return out, nil
}

// ---- the client commands ----

// DiffCmd shows git diff of an instance's working tree.
type DiffCmd struct {
	APIFlags
	JSONFlag
	Instance string `arg:"" help:"Instance id, or a task id (t-…): the task's whole change against the commit its branch started from (workers spawned with --isolate)." placeholder:"INSTANCE|TASK"`
	Base     bool   `help:"An isolated worker's whole change against the commit its branch started from, new files included." env:"PIFLEET_DIFF_BASE"`
	Ref      string `help:"Compare against this commit (default: HEAD)." env:"PIFLEET_DIFF_REF"`
	Staged   bool   `help:"Show the staged changes." env:"PIFLEET_DIFF_STAGED"`
	Stat     bool   `help:"Show a diffstat only." env:"PIFLEET_DIFF_STAT"`
}

// Run prints the diff.
func (c *DiffCmd) Run(out *Output) error {
	return showFile(out, &c.APIFlags, c.JSON, func(ctx context.Context, cl *controlapi.Client) (controlapi.FileResult, error) {
		if strings.HasPrefix(c.Instance, "t-") {
			return cl.TaskDiff(ctx, c.Instance, c.Stat)
		}
		return cl.Diff(ctx, c.Instance, controlapi.DiffQuery{Ref: c.Ref, Staged: c.Staged, Stat: c.Stat, Base: c.Base})
	})
}

// CatCmd prints a file of an instance's working tree.
type CatCmd struct {
	APIFlags
	JSONFlag
	Instance string `arg:"" help:"Instance id."`
	Path     string `arg:"" help:"File, relative to the instance's cwd."`
	Offset   int    `help:"First line to print, from 1." env:"PIFLEET_CAT_OFFSET"`
	Limit    int    `help:"Print at most this many lines." env:"PIFLEET_CAT_LIMIT"`
}

// Run prints the file.
func (c *CatCmd) Run(out *Output) error {
	if c.Offset < 0 || c.Limit < 0 {
		return fmt.Errorf("--offset and --limit must not be negative")
	}
	return showFile(out, &c.APIFlags, c.JSON, func(ctx context.Context, cl *controlapi.Client) (controlapi.FileResult, error) {
		return cl.ReadFile(ctx, c.Instance, controlapi.ReadQuery{Path: c.Path, Offset: c.Offset, Limit: c.Limit})
	})
}

// LsCmd lists a directory of an instance's working tree.
type LsCmd struct {
	APIFlags
	JSONFlag
	Instance string `arg:"" help:"Instance id."`
	Path     string `arg:"" optional:"" help:"Directory, relative to the instance's cwd (default: the cwd)."`
}

// Run prints the listing.
func (c *LsCmd) Run(out *Output) error {
	return showFile(out, &c.APIFlags, c.JSON, func(ctx context.Context, cl *controlapi.Client) (controlapi.FileResult, error) {
		return cl.ListDir(ctx, c.Instance, c.Path)
	})
}

// GrepCmd searches an instance's working tree.
type GrepCmd struct {
	APIFlags
	JSONFlag
	Instance string `arg:"" help:"Instance id."`
	Pattern  string `arg:"" help:"Regular expression."`
	Glob     string `help:"Only files whose path (relative to the cwd) matches this glob: * within a directory, ** across them (e.g. '**/*.go')." env:"PIFLEET_GREP_GLOB"`
}

// Run prints the matches.
func (c *GrepCmd) Run(out *Output) error {
	return showFile(out, &c.APIFlags, c.JSON, func(ctx context.Context, cl *controlapi.Client) (controlapi.FileResult, error) {
		return cl.Grep(ctx, c.Instance, controlapi.GrepQuery{Pattern: c.Pattern, Glob: c.Glob})
	})
}

// show asks the server for a file answer and prints it: the JSON answer
// with --json, else the text (terminal control sequences removed: it is
// the worker's work) or the listing.
func showFile(out *Output, api *APIFlags, asJSON bool, ask func(context.Context, *controlapi.Client) (controlapi.FileResult, error)) error {
	var res controlapi.FileResult
	if err := api.withClient(func(ctx context.Context, cl *controlapi.Client) (err error) {
		res, err = ask(ctx, cl)
		return err
	}); err != nil {
		return err
	}
	if asJSON {
		return printJSON(out.Out, res)
	}
	w := out.Out
	switch {
	case res.Text != nil:
		text := termsafe.Clean(*res.Text)
		fmt.Fprint(w, text)
		if text != "" && !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(w)
		}
	case res.Base64 != "":
		fmt.Fprintf(w, "(binary file, %s, %d bytes base64; use --json for the content)\n", res.Mime, len(res.Base64))
	default:
		for _, e := range res.Entries {
			name := termsafe.Clean(e.Name)
			switch {
			case e.Kind == "dir":
				fmt.Fprintf(w, "%10s  %s/\n", "", name)
			case e.Bytes != nil:
				fmt.Fprintf(w, "%10d  %s\n", *e.Bytes, name)
			default:
				fmt.Fprintf(w, "%10s  %s\n", "", name)
			}
		}
	}
	if res.Truncated {
		fmt.Fprintln(out.Err, "note: the agent truncated the answer at its size limit")
	}
	return nil
}
