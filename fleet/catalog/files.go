package catalog

import (
	"context"
	"fmt"
	"strings"
	"time"

	"example.com/pifleet/fleet/controlapi"
)

// fileTools read a worker's working tree through its agent, without a
// model turn: the review's evidence.
func fileTools() []*tool {
	return []*tool{
		{
			name: "remote_diff", title: "Worker diff", readOnly: true, timeout: time.Minute,
			params: []param{pInstance,
				{name: "ref", typ: "string", description: "Compare against this git ref (default HEAD)."},
				{name: "staged", typ: "boolean", description: "The staged changes only."},
				{name: "stat", typ: "boolean", description: "Only the --stat summary (files and line counts)."},
				{name: "base", typ: "boolean", description: "For an isolated worker: its whole change against the commit its branch started from, new files included (ref and staged are ignored)."}},
			description: "Show git diff of a worker's working tree (what it changed), read by its agent. Use it to review a task before accepting it.",
			run: func(ctx context.Context, c *call) (controlapi.ToolResult, error) {
				id := c.str("instanceId")
				res, err := c.f.Diff(ctx, id, controlapi.DiffQuery{Ref: c.str("ref"), Staged: c.boolean("staged", false), Stat: c.boolean("stat", false), Base: c.boolean("base", false)})
				if err != nil {
					return controlapi.ToolResult{}, err
				}
				return fileText(fmt.Sprintf("git diff of %s's tree", id), "diff", res), nil
			},
		},
		{
			name: "remote_read", title: "Read a worker's file", readOnly: true, timeout: time.Minute,
			params: []param{pInstance,
				{name: "path", typ: "string", required: true, description: "The file, relative to the worker's cwd."},
				{name: "offset", typ: "integer", description: "The first line to show, from 1."},
				{name: "limit", typ: "integer", description: "How many lines (default: the agent's page, 2,000 lines)."}},
			description: "Read a file of a worker's working tree (a page of its lines), through its agent.",
			run: func(ctx context.Context, c *call) (controlapi.ToolResult, error) {
				id, p := c.str("instanceId"), c.str("path")
				off, lim := int(c.number("offset", 0)), int(c.number("limit", 0))
				if off < 0 || lim < 0 {
					return controlapi.ToolResult{}, badArg("offset", "and limit cannot be negative")
				}
				res, err := c.f.ReadFile(ctx, id, controlapi.ReadQuery{Path: p, Offset: off, Limit: lim})
				if err != nil {
					return controlapi.ToolResult{}, err
				}
				if res.Text == nil {
					return text("%s is a binary file (%s, %d bytes as base64); it is not shown.", p, label(res.Mime), len(res.Base64)), nil
				}
				return fileText(fmt.Sprintf("%s in %s's tree", p, id), "file", res), nil
			},
		},
		{
			name: "remote_ls", title: "List a worker's directory", readOnly: true, timeout: time.Minute,
			params:      []param{pInstance, {name: "path", typ: "string", description: "The directory, relative to the worker's cwd (default: the cwd)."}},
			description: "List a directory of a worker's working tree, through its agent.",
			run: func(ctx context.Context, c *call) (controlapi.ToolResult, error) {
				id, p := c.str("instanceId"), c.str("path")
				res, err := c.f.ListDir(ctx, id, p)
				if err != nil {
					return controlapi.ToolResult{}, err
				}
				var b strings.Builder
				for _, e := range res.Entries {
					name := e.Name
					if e.Kind == "dir" {
						name += "/"
					}
					b.WriteString(name)
					if e.Bytes != nil {
						fmt.Fprintf(&b, "\t%d bytes", *e.Bytes)
					}
					b.WriteByte('\n')
				}
				if res.Truncated {
					b.WriteString("(the listing was cut at the agent's limit)\n")
				}
				where := p
				if where == "" {
					where = "."
				}
				return controlapi.ToolResult{Text: fmt.Sprintf("%d entries of %s in %s's tree:\n%s", len(res.Entries), where, id,
					untrusted("directory listing", b.String()))}, nil
			},
		},
		{
			name: "remote_grep", title: "Search a worker's tree", readOnly: true, timeout: time.Minute,
			params: []param{pInstance,
				{name: "pattern", typ: "string", required: true, description: "A regular expression (RE2 syntax)."},
				{name: "glob", typ: "string", description: "Only files matching this glob (e.g. *.go)."}},
			description: "Search a worker's working tree for a regular expression: path:line:text matches (at most 200), through its agent.",
			run: func(ctx context.Context, c *call) (controlapi.ToolResult, error) {
				id := c.str("instanceId")
				res, err := c.f.Grep(ctx, id, controlapi.GrepQuery{Pattern: c.str("pattern"), Glob: c.str("glob")})
				if err != nil {
					return controlapi.ToolResult{}, err
				}
				return fileText(fmt.Sprintf("matches of %q in %s's tree", c.str("pattern"), id), "matches", res), nil
			},
		},
	}
}

// fileText frames a file service's text answer.
func fileText(head, what string, res controlapi.FileResult) controlapi.ToolResult {
	s := ""
	if res.Text != nil {
		s = *res.Text
	}
	note := ""
	if res.Truncated {
		note = " (cut at the agent's limit)"
	}
	return controlapi.ToolResult{Text: head + note + ":\n" + untrusted(what, cutHead(s, MaxResultChars-500))}
}
