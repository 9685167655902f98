package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/alecthomas/kong"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/cli"
	"example.com/pifleet/internal/eventtext"
	"example.com/pifleet/internal/termsafe"
)

// SpawnCmd is `spawn`.
type SpawnCmd struct {
	APIFlags    `embed:""`
	TimeoutFlag `embed:""`
	JSONFlag    `embed:""`

	Agent       string            `help:"Agent to spawn on (its directory name); with --from-session, the session's by default." env:"PIFLEET_SPAWN_AGENT"`
	Cwd         string            `help:"Working directory of the worker, on the agent's machine; with --from-session, the session's by default." env:"PIFLEET_SPAWN_CWD"`
	Bundle      string            `help:"Bundle to provision; with --from-session, the one the session's record names by default." env:"PIFLEET_SPAWN_BUNDLE"`
	Pin         string            `help:"Refuse any version of the bundle but this bundleHash." env:"PIFLEET_SPAWN_PIN" placeholder:"HASH"`
	Model       string            `help:"Override the bundle's model: provider/id." env:"PIFLEET_SPAWN_MODEL" placeholder:"PROVIDER/ID"`
	FromSession string            `help:"Start on a session of the registry: its path, its session id or its name (baseline:api); a copy of it unless --attach." env:"PIFLEET_SPAWN_FROM_SESSION" placeholder:"REF"`
	Attach      bool              `help:"With --from-session: append to the session itself (refused for a pinned baseline)." env:"PIFLEET_SPAWN_ATTACH"`
	Env         map[string]string `help:"Extra environment of the worker (KEY=VALUE;…)." env:"PIFLEET_SPAWN_ENV" mapsep:";"`
	Progress    string            `help:"Provisioning progress on stderr: auto (on a terminal), always, never." default:"auto" enum:"auto,always,never" env:"PIFLEET_PROGRESS"`
	Isolate     bool              `help:"Run the worker in a git worktree of its own, on a new branch of the cwd's repository (refused when the tree has uncommitted changes or HEAD is detached, unless --base is given)." env:"PIFLEET_SPAWN_ISOLATE"`
	Branch      string            `help:"With --isolate: the new branch's name (default pifleet/<taskId>-<slug>)." env:"PIFLEET_SPAWN_BRANCH"`
	Base        string            `help:"With --isolate: the ref the branch starts from (default HEAD)." env:"PIFLEET_SPAWN_BASE"`
}

// request checks the flags and builds the API request.
func (c *SpawnCmd) request() (controlapi.SpawnRequest, error) {
	req := controlapi.SpawnRequest{Agent: c.Agent, Cwd: c.Cwd, Bundle: c.Bundle, PinnedHash: c.Pin, FromSession: c.FromSession, Env: c.Env}
	switch {
	case c.Attach && c.FromSession == "":
		return req, cli.Usagef("--attach needs --from-session")
	case c.Attach:
		req.SessionMode = controlapi.SessionAttach
	case c.FromSession == "" && (c.Agent == "" || c.Cwd == "" || c.Bundle == ""):
		return req, cli.Usagef("spawn needs --agent, --cwd and --bundle (or --from-session)")
	}
	if (c.Branch != "" || c.Base != "") && !c.Isolate {
		return req, errors.New("--branch and --base need --isolate")
	}
	if c.Isolate {
		req.Isolation = &controlapi.Isolation{Branch: c.Branch, Base: c.Base}
	}
	if c.Model != "" {
		m, err := controlapi.ParseModelRef(c.Model)
		if err != nil {
			return req, err
		}
		req.Model = &m
	}
	return req, nil
}

// Run spawns and prints the instance id.
func (c *SpawnCmd) Run(out *Output) error {
	req, err := c.request()
	if err != nil {
		return err
	}
	return c.withClientWithin(c.Timeout, "the spawn", func(ctx context.Context, cl *controlapi.Client) error {
		pr := newProgressPrinter(out, c.Progress)
		res, err := cl.Spawn(ctx, req, pr.print)
		pr.done()
		if err != nil {
			return err
		}
		return printSpawned(out, res, c.JSON)
	})
}

// newProgressPrinter returns the printer --progress asks for: nil (no
// output) for never, or for auto off a terminal.
func newProgressPrinter(out *Output, mode string) *progressPrinter {
	if mode == "always" || (mode == "auto" && isTerminal(out.Err)) {
		return &progressPrinter{w: out.Err, overwrite: isTerminal(out.Err)}
	}
	return nil
}

// progressPrinter shows spawn progress: one line rewritten in place on a
// terminal, one line per step otherwise. A nil printer prints nothing.
type progressPrinter struct {
	w         io.Writer
	overwrite bool
	open      bool
}

func (p *progressPrinter) print(sp controlapi.SpawnProgress) {
	if p == nil {
		return
	}
	line := describeProgress(sp)
	if p.overwrite {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.open = true
		return
	}
	fmt.Fprintln(p.w, line)
}

func (p *progressPrinter) done() {
	if p != nil && p.open {
		fmt.Fprintln(p.w)
	}
}

// describeProgress is one readable line for a spawn step.
func describeProgress(sp controlapi.SpawnProgress) string {
	var b strings.Builder
	b.WriteString(sp.Phase)
	if sp.Bundle != "" {
		fmt.Fprintf(&b, " %s", sp.Bundle)
	}
	if sp.FilesTotal > 0 {
		fmt.Fprintf(&b, ": %d/%d files fetched (%s)", sp.FilesFetched, sp.FilesTotal, bytesOf(sp.BytesFetched))
		if sp.FilesReused > 0 {
			fmt.Fprintf(&b, ", %d reused (%s)", sp.FilesReused, bytesOf(sp.BytesReused))
		}
	}
	if sp.Message != "" {
		fmt.Fprintf(&b, " — %s", sp.Message)
	}
	return b.String()
}

// bytesOf is a size in B, KiB, MiB or GiB.
func bytesOf(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 2; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMG"[exp])
}

// PromptCmd is `prompt`.
type PromptCmd struct {
	APIFlags    `embed:""`
	TimeoutFlag `embed:""`
	JSONFlag    `embed:""`

	Wait     bool   `help:"Wait until the worker settled and print its final message." env:"PIFLEET_WAIT"`
	Task     bool   `help:"Send it as a tracked task (reviewed with accept or reject); prints the task id." env:"PIFLEET_TASK"`
	Instance string `arg:"" help:"Instance id."`
	Text     string `arg:"" help:"The prompt; - reads it from standard input."`
}

// Run sends the prompt.
func (c *PromptCmd) Run(out *Output) error {
	text, err := textArg(c.Text)
	if err != nil {
		return err
	}
	return c.withClientWithin(c.Timeout, "the worker", func(ctx context.Context, cl *controlapi.Client) error {
		res, err := cl.Prompt(ctx, c.Instance, controlapi.PromptRequest{Text: text, Wait: c.Wait, Task: c.Task})
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, res)
		}
		if res.TaskID != "" {
			fmt.Fprintf(out.Out, "task %s\n", res.TaskID)
		}
		if res.Settled {
			fmt.Fprintln(out.Out, res.Reply)
		}
		return nil
	})
}

// stdin is where "-" reads a text argument; tests replace it.
var stdin io.Reader = os.Stdin

// textArg returns s, or standard input when s is "-".
func textArg(s string) (string, error) {
	if s != "-" {
		return s, nil
	}
	b, err := io.ReadAll(bufio.NewReader(stdin))
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// SteerCmd is `steer`.
type SteerCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Instance string `arg:"" help:"Instance id."`
	Text     string `arg:"" help:"Message delivered after the worker's current turn; - reads standard input."`
}

// Run steers.
func (c *SteerCmd) Run(out *Output) error {
	text, err := textArg(c.Text)
	if err != nil {
		return err
	}
	return simple(&c.APIFlags, c.JSON, out, "steered "+c.Instance, map[string]any{"instanceId": c.Instance, "steered": true}, func(ctx context.Context, cl *controlapi.Client) error {
		return cl.Steer(ctx, c.Instance, text)
	})
}

// AbortCmd is `abort`.
type AbortCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Instance string `arg:"" help:"Instance id."`
}

// Run aborts.
func (c *AbortCmd) Run(out *Output) error {
	return simple(&c.APIFlags, c.JSON, out, "aborted "+c.Instance, map[string]any{"instanceId": c.Instance, "aborted": true}, func(ctx context.Context, cl *controlapi.Client) error {
		return cl.Abort(ctx, c.Instance)
	})
}

// StopCmd is `stop`.
type StopCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Instance string `arg:"" help:"Instance id."`
}

// Run stops.
func (c *StopCmd) Run(out *Output) error {
	return simple(&c.APIFlags, c.JSON, out, "stopped "+c.Instance, map[string]any{"instanceId": c.Instance, "state": "stopped"}, func(ctx context.Context, cl *controlapi.Client) error {
		return cl.Stop(ctx, c.Instance)
	})
}

// simple runs a call that answers nothing and confirms it: in one line,
// or with --json as result.
func simple(f *APIFlags, asJSON bool, out *Output, done string, result any, call func(context.Context, *controlapi.Client) error) error {
	return f.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		if err := call(ctx, cl); err != nil {
			return err
		}
		if asJSON {
			return printJSON(out.Out, result)
		}
		_, err := fmt.Fprintln(out.Out, done)
		return err
	})
}

// OutputCmd is `output`.
type OutputCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Instance string `arg:"" help:"Instance id."`
}

// Run prints the transcript of the buffered tail and the last assistant
// message.
func (c *OutputCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		o, err := cl.Output(ctx, c.Instance)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, o)
		}
		writeTranscript(out.Out, o.Tail)
		if o.LastAssistant != "" {
			fmt.Fprintf(out.Out, "\nlast assistant message:\n%s\n", termsafe.Clean(o.LastAssistant))
		}
		return nil
	})
}

// writeTranscript prints the transcript lines of a worker's events.
func writeTranscript(w io.Writer, events []json.RawMessage) {
	for _, raw := range events {
		for _, l := range eventtext.Render(raw, eventtext.Options{}) {
			fmt.Fprintln(w, l)
		}
	}
}

// LogsCmd is `logs`.
type LogsCmd struct {
	APIFlags    `embed:""`
	TimeoutFlag `embed:""`
	Follow      bool   `help:"Keep printing the worker's transcript as it works, until it stops or you interrupt." short:"f" env:"PIFLEET_LOGS_FOLLOW"`
	JSON        bool   `help:"Print the worker's events as JSON lines, verbatim." env:"PIFLEET_JSON"`
	Instance    string `arg:"" help:"Instance id."`
}

// Run prints the worker's recent transcript and, with --follow, what comes
// next.
func (c *LogsCmd) Run(out *Output) error {
	return c.withClientWithin(c.Timeout, "the worker", func(ctx context.Context, cl *controlapi.Client) error {
		// Subscribe before reading the tail, so that nothing falls between
		// the two (an event in both is printed twice at worst).
		var s *controlapi.Stream
		if c.Follow {
			var err error
			if s, err = cl.Watch(ctx); err != nil {
				return err
			}
			defer s.Close()
		}
		o, err := cl.Output(ctx, c.Instance)
		if err != nil {
			return err
		}
		print := func(raw json.RawMessage) error {
			if c.JSON {
				_, err := fmt.Fprintf(out.Out, "%s\n", raw)
				return err
			}
			writeTranscript(out.Out, []json.RawMessage{raw})
			return nil
		}
		for _, raw := range o.Tail {
			if err := print(raw); err != nil {
				return err
			}
		}
		if s == nil {
			return nil
		}
		for {
			ch, err := nextChange(ctx, s)
			if err != nil || ch == nil {
				return err // nil: interrupted
			}
			if ch.InstanceID != c.Instance {
				continue
			}
			switch {
			case ch.Kind == controlapi.ChangeEvent:
				if err := print(ch.Data); err != nil {
					return err
				}
			case ch.Kind == controlapi.ChangeInstanceState && (ch.To == "stopped" || ch.To == "failed"):
				if !c.JSON {
					fmt.Fprintf(out.Out, "worker: %s\n", ch.To)
				}
				return nil
			}
		}
	})
}

// RebundleCmd is `rebundle`.
type RebundleCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Instance string `arg:"" help:"Instance id."`
	Bundle   string `arg:"" help:"Bundle to switch to."`
}

// Run rebundles.
func (c *RebundleCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		res, err := cl.Rebundle(ctx, c.Instance, c.Bundle)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, res)
		}
		_, err = fmt.Fprintf(out.Out, "%s now runs bundle %s %s\n", c.Instance, res.Bundle, res.BundleHash)
		return err
	})
}

// ToolsCmd is `tools`.
type ToolsCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Instance string `arg:"" help:"Instance id."`
	Tools    string `arg:"" help:"Active tools, comma-separated (read,grep,bash); \"\" for none."`
}

// list splits the comma-separated tools.
func (c *ToolsCmd) list() []string {
	tools := []string{}
	for _, t := range strings.Split(c.Tools, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tools = append(tools, t)
		}
	}
	return tools
}

// Run sets the tools.
func (c *ToolsCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		active, err := cl.SetTools(ctx, c.Instance, c.list())
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, controlapi.ToolsRequest{Tools: active})
		}
		_, err = fmt.Fprintf(out.Out, "%s tools: %s\n", c.Instance, strings.Join(active, ","))
		return err
	})
}

// ModelCmd groups the model commands; `model INSTANCE PROVIDER/ID` is
// `model set`.
type ModelCmd struct {
	Set   ModelSetCmd `cmd:"" default:"withargs" help:"Switch an instance's model (the default: model INSTANCE PROVIDER/ID)."`
	Pin   ModelPinCmd `cmd:"" help:"Pin an instance's model: switching it (set_model, cycle_model) is refused, and a model found changed is set back."`
	Unpin ModelPinCmd `cmd:"" help:"Lift an instance's model pin."`
}

// ModelSetCmd is `model set`.
type ModelSetCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Instance string `arg:"" help:"Instance id."`
	Model    string `arg:"" help:"provider/id."`
}

// ModelPinCmd is `model pin` and `model unpin`.
type ModelPinCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Instance string `arg:"" help:"Instance id."`
}

// Run pins or unpins (the command's name says which).
func (c *ModelPinCmd) Run(kctx *kong.Context, out *Output) error {
	pin := kctx.Selected().Name == "pin"
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		res, err := cl.PinModel(ctx, c.Instance, pin)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, res)
		}
		what := "unpinned"
		if res.Pinned {
			what = "pinned"
		}
		if res.Model != nil {
			what += " (" + res.Model.String() + ")"
		}
		_, err = fmt.Fprintf(out.Out, "%s model %s\n", c.Instance, what)
		return err
	})
}

// Run switches the model.
func (c *ModelSetCmd) Run(out *Output) error {
	m, err := controlapi.ParseModelRef(c.Model)
	if err != nil {
		return err
	}
	return simple(&c.APIFlags, c.JSON, out, c.Instance+" model: "+m.String(), map[string]any{"instanceId": c.Instance, "model": m}, func(ctx context.Context, cl *controlapi.Client) error {
		return cl.SetModel(ctx, c.Instance, m)
	})
}
