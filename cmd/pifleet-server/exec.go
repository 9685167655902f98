package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/cli"
	"example.com/pifleet/transport"
)

// abortGrace bounds the abort of a command whose caller went away.
const abortGrace = 10 * time.Second

// Exec runs a command through the fleet; a caller that goes away aborts
// it.
func (b *fleetBackend) Exec(ctx context.Context, req controlapi.ExecRequest, started func(controlapi.ExecStarted),
	output func(controlapi.ExecOutput)) (controlapi.ExecResult, error) {
	fr := fleet.ExecRequest{Argv: req.Argv, Shell: req.Shell, Cwd: req.Cwd,
		Timeout: time.Duration(req.TimeoutSeconds * float64(time.Second))}
	machine := req.Machine
	if req.InstanceID != "" {
		// Known before the command starts: started may be called before
		// Exec returns.
		for _, is := range b.f.Status(ctx).Instances {
			if is.InstanceID == req.InstanceID {
				machine = is.Agent
			}
		}
	}
	if started != nil {
		fr.OnStart = func(id string) { started(controlapi.ExecStarted{Machine: machine, ExecID: id}) }
	}
	if output != nil {
		fr.OnOutput = func(c fleet.ExecChunk) {
			output(controlapi.ExecOutput{Seq: c.Seq, Stream: string(c.Stream), Data: c.Data, Dropped: c.Dropped})
		}
	}
	var (
		x   *fleet.Execution
		err error
	)
	if req.InstanceID != "" {
		var in *fleet.Instance
		if in, err = b.instance(req.InstanceID); err != nil {
			return controlapi.ExecResult{}, err
		}
		x, err = in.Exec(ctx, fr)
	} else {
		x, err = b.f.Exec(ctx, req.Machine, fr)
	}
	if err != nil {
		return controlapi.ExecResult{}, apiError(err)
	}
	res, err := x.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			actx, cancel := context.WithTimeout(context.Background(), abortGrace)
			_ = x.Abort(actx)
			cancel()
		}
		return controlapi.ExecResult{}, apiError(err)
	}
	out := controlapi.ExecResult{Machine: x.Agent(), ExecID: res.ExecID, ExitCode: res.ExitCode, Signal: res.Signal,
		TimedOut: res.TimedOut, Aborted: res.Aborted, DurationMs: res.Duration.Milliseconds(),
		Stdout: strings.ToValidUTF8(string(res.Stdout), "\uFFFD"), Stderr: strings.ToValidUTF8(string(res.Stderr), "\uFFFD"),
		StdoutTruncated: res.StdoutTruncated, StderrTruncated: res.StderrTruncated}
	return out, nil
}

// ExecAbort aborts a running command.
func (b *fleetBackend) ExecAbort(ctx context.Context, machine, execID string) error {
	return apiError(b.f.AbortExecution(ctx, machine, execID))
}

// Executions converts the agent's list.
func (b *fleetBackend) Executions(ctx context.Context, machine string) ([]controlapi.Execution, error) {
	l, err := b.f.Executions(ctx, machine)
	if err != nil {
		return nil, apiError(err)
	}
	out := make([]controlapi.Execution, 0, len(l))
	for _, r := range l {
		e := controlapi.Execution{ExecID: r.ExecID, Mode: string(r.Mode), Cwd: r.Cwd, State: string(r.State),
			StartedAt: time.UnixMilli(int64(r.StartedAt)).UTC(), TimedOut: r.TimedOut, Aborted: r.Aborted}
		if r.FinishedAt != nil {
			e.FinishedAt = new(time.UnixMilli(int64(*r.FinishedAt)).UTC())
		}
		if r.ExitCode != nil {
			e.ExitCode = new(int(*r.ExitCode))
		}
		out = append(out, e)
	}
	return out, nil
}

// ExecCmd is `exec`.
type ExecCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Machine  string        `help:"Run on this agent's machine (--cwd is then required)." xor:"where" required:"" env:"PIFLEET_EXEC_MACHINE"`
	Instance string        `help:"Run in this worker's working tree (--cwd is relative to it)." xor:"where" required:"" env:"PIFLEET_EXEC_INSTANCE"`
	Cwd      string        `help:"Directory to run in." env:"PIFLEET_EXEC_CWD"`
	Shell    bool          `help:"Run the command line with the agent's shell (bash -lc) instead of as an executable and its arguments." env:"PIFLEET_EXEC_SHELL"`
	Timeout  time.Duration `help:"End the command after this long (default: the agent's, 5m; at most 1h)." env:"PIFLEET_EXEC_TIMEOUT"`
	Raw      bool          `help:"Write the output exactly as the command wrote it (terminal control sequences included)." env:"PIFLEET_EXEC_RAW"`
	Command  []string      `arg:"" passthrough:"" help:"The command and its arguments (put -- before a command that starts with -)."`
}

// Run streams the command's output and exits with its exit status (124
// when it timed out, 130 when aborted, 127 when it could not start).
func (c *ExecCmd) Run(out *Output) error {
	req := controlapi.ExecRequest{Machine: c.Machine, InstanceID: c.Instance, Cwd: c.Cwd,
		TimeoutSeconds: c.Timeout.Seconds()}
	if len(c.Command) > 0 && c.Command[0] == "--" {
		c.Command = c.Command[1:]
	}
	if len(c.Command) == 0 {
		return errors.New("no command given")
	}
	if c.Shell {
		req.Shell = strings.Join(c.Command, " ")
	} else {
		req.Argv = c.Command
	}
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		var res controlapi.ExecResult
		var err error
		if c.JSON {
			if res, err = cl.Exec(ctx, req, nil); err != nil {
				return err
			}
			if err := printJSON(out.Out, res); err != nil {
				return err
			}
		} else {
			res, err = cl.Exec(ctx, req, func(o controlapi.ExecOutput) {
				w := out.Out
				if o.Stream == string(transport.Stderr) {
					w = out.Err
				}
				if o.Dropped > 0 {
					fmt.Fprintf(out.Err, "pifleet-server: %d output chunks dropped (reader too slow)\n", o.Dropped)
				}
				if c.Raw {
					_, _ = w.Write(o.Data)
				} else {
					_, _ = io.WriteString(w, terminalSafe(o.Data))
				}
			})
			if err != nil {
				return err
			}
		}
		return execStatus(out, res, !c.JSON)
	})
}

// execStatus turns a result into the CLI's exit status.
func execStatus(out *Output, res controlapi.ExecResult, explain bool) error {
	say := func(format string, args ...any) {
		if explain {
			fmt.Fprintf(out.Err, "pifleet-server: "+format+"\n", args...)
		}
	}
	switch {
	case res.TimedOut:
		say("command timed out after %s", time.Duration(res.DurationMs)*time.Millisecond)
		return cli.ExitCode(124)
	case res.Aborted:
		say("command aborted")
		return cli.ExitCode(130)
	case res.ExitCode == nil && res.Signal != "":
		say("command killed by %s", res.Signal)
		return cli.ExitCode(137)
	case res.ExitCode == nil:
		return cli.ExitCode(127)
	case *res.ExitCode != 0:
		return cli.ExitCode(*res.ExitCode)
	}
	return nil
}

// terminalSafe is output of a remote command made harmless for a
// terminal: text, newlines and tabs pass; other control characters (the
// escape sequences that could rewrite the screen or the title) and
// invalid UTF-8 become visible escapes.
func terminalSafe(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
		case r == '\n' || r == '\t':
			sb.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&sb, `\x%02x`, r)
		default:
			sb.Write(b[:n])
		}
		b = b[n:]
	}
	return sb.String()
}
