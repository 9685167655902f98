package catalog

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"example.com/pifleet/fleet/controlapi"
)

// Exec bounds: a command's default and longest run, and how many commands
// started in the background the catalogue remembers.
const (
	execDefault = 300 * time.Second
	execMax     = time.Hour
	execKept    = 50
	// execKeepBytes bounds what is kept of each stream of a background
	// command (the model sees at most MaxExecChars of it).
	execKeepBytes = 512 << 10
)

// background is a command started with wait=false: its output so far and,
// once it ended, its result.
type background struct {
	machine, id string
	started     time.Time

	mu     sync.Mutex
	out    tailBuffer
	result *controlapi.ExecResult
	err    error
}

// tailBuffer keeps the last execKeepBytes written.
type tailBuffer struct {
	b   []byte
	cut int
}

func (t *tailBuffer) write(p []byte) {
	t.b = append(t.b, p...)
	if over := len(t.b) - execKeepBytes; over > 0 {
		t.cut += over
		t.b = append(t.b[:0:0], t.b[over:]...)
	}
}

// execStore remembers the background commands, the newest execKept.
type execStore struct {
	mu    sync.Mutex
	byKey map[string]*background
	order []string
}

func (s *execStore) add(b *background) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[string]*background{}
	}
	k := b.machine + "/" + b.id
	s.byKey[k] = b
	s.order = append(s.order, k)
	if len(s.order) > execKept {
		delete(s.byKey, s.order[0])
		s.order = s.order[1:]
	}
}

func (s *execStore) get(machine, id string) *background {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[machine+"/"+id]
}

var pHost = param{name: "host", typ: "string", required: true, description: "The agent machine (as fleet_status names it; a remote_exec answer says it)."}

func execTools(store *execStore) []*tool {
	return []*tool{
		{
			name: "remote_exec", title: "Run a command", maxChars: MaxExecChars + 2000, timeout: execDefault + 15*time.Second, maxTimeout: execMax + 15*time.Second,
			params: []param{
				{name: "instanceId", typ: "string", description: "Run it in this worker's working tree (cwd is then relative to it)."},
				{name: "host", typ: "string", description: "Or: run it on this agent machine (cwd required)."},
				{name: "command", typ: "string", description: "A command line for the machine's shell (sh -c, or PowerShell on Windows)."},
				{name: "argv", typ: "array", items: "string", description: "Or: the executable and its arguments, run without a shell."},
				{name: "cwd", typ: "string", description: "The directory to run in."},
				{name: "timeoutSeconds", typ: "number", def: 300, description: "End the command after this long (at most 3600)."},
				{name: "wait", typ: "boolean", def: true, description: "true (default): wait for the end and return the output. false: start it and return its execId at once; remote_exec_output shows it later."},
			},
			description: "Run a command on an agent machine or in a worker's tree, without a model turn (tests, builds, git): " +
				"the exit status and the end of its output (the last 2,000 lines, at most 50,000 characters). Needs the " +
				"machine's trust policy steer and its agent started with --exec-policy full.",
			run: func(ctx context.Context, c *call) (controlapi.ToolResult, error) { return runExec(ctx, c, store) },
		},
		{
			name: "remote_exec_output", title: "Command output", readOnly: true, maxChars: MaxExecChars + 2000, timeout: 30 * time.Second,
			params:      []param{pHost, {name: "execId", typ: "string", required: true, description: "The command's id (remote_exec with wait=false returned it)."}},
			description: "Show a command started with remote_exec wait=false: running or how it ended, and the end of its output.",
			run: func(ctx context.Context, c *call) (controlapi.ToolResult, error) {
				b := store.get(c.str("host"), c.str("execId"))
				if b == nil {
					return controlapi.ToolResult{}, &controlapi.Error{Code: controlapi.CodeUnknownExecution,
						Message: fmt.Sprintf("no command %s on %s started by these tools", c.str("execId"), c.str("host")),
						Hint:    "remote_exec_list lists a machine's commands; only those started with wait=false keep their output here"}
				}
				b.mu.Lock()
				defer b.mu.Unlock()
				if b.result == nil && b.err == nil {
					return controlapi.ToolResult{Text: fmt.Sprintf("Command %s on %s is running (for %s). Output so far:\n%s", b.id, b.machine,
						time.Since(b.started).Round(time.Second), untrusted("command output", cutTail(string(b.out.b), MaxExecLines, MaxExecChars)))}, nil
				}
				if b.err != nil {
					return controlapi.ToolResult{}, b.err
				}
				return controlapi.ToolResult{Text: execText(*b.result)}, nil
			},
		},
		{
			name: "remote_exec_list", title: "Commands", readOnly: true, timeout: 30 * time.Second,
			params:      []param{pHost},
			description: "List a machine's running commands, then its recent ones (id, cwd, state, exit code).",
			run: func(ctx context.Context, c *call) (controlapi.ToolResult, error) {
				xs, err := c.f.Executions(ctx, c.str("host"))
				if err != nil {
					return controlapi.ToolResult{}, err
				}
				if xs == nil {
					xs = []controlapi.Execution{}
				}
				return controlapi.ToolResult{Text: asJSON(xs)}, nil
			},
		},
		{
			name: "remote_exec_abort", title: "Abort a command", destructive: true, timeout: 30 * time.Second,
			params:      []param{pHost, {name: "execId", typ: "string", required: true, description: "The command's id."}},
			description: "Abort a running command (TERM, then KILL).",
			run: func(ctx context.Context, c *call) (controlapi.ToolResult, error) {
				if err := c.f.ExecAbort(ctx, c.str("host"), c.str("execId")); err != nil {
					return controlapi.ToolResult{}, err
				}
				return text("Aborted command %s on %s.", c.str("execId"), c.str("host")), nil
			},
		},
	}
}

func runExec(ctx context.Context, c *call, store *execStore) (controlapi.ToolResult, error) {
	req := controlapi.ExecRequest{InstanceID: c.str("instanceId"), Machine: c.str("host"), Shell: c.str("command"), Cwd: c.str("cwd")}
	req.Argv, _ = c.strings("argv")
	switch {
	case req.InstanceID == "" && req.Machine == "":
		return controlapi.ToolResult{}, badArg("instanceId", "or host is needed")
	case (len(req.Argv) == 0) == (req.Shell == ""):
		return controlapi.ToolResult{}, badArg("command", "or argv is needed (exactly one)")
	case req.InstanceID == "" && req.Cwd == "":
		return controlapi.ToolResult{}, badArg("cwd", "is needed to run on a host")
	}
	timeout := c.number("timeoutSeconds", execDefault.Seconds())
	if timeout <= 0 || timeout > execMax.Seconds() {
		return controlapi.ToolResult{}, badArg("timeoutSeconds", "must be above 0 and at most %.0f", execMax.Seconds())
	}
	req.TimeoutSeconds = timeout
	if req.Machine == "" {
		// The machine names the command for list, output and abort.
		st, err := c.f.Status(ctx)
		if err != nil {
			return controlapi.ToolResult{}, err
		}
		for _, in := range st.Instances {
			if in.ID == req.InstanceID {
				req.Machine = in.Agent
			}
		}
	}
	if c.boolean("wait", true) {
		lines := 0
		res, err := c.f.Exec(ctx, req, func(s controlapi.ExecStarted) {
			c.step("command %s started on %s", s.ExecID, label(req.Machine))
		}, func(o controlapi.ExecOutput) {
			lines += strings.Count(string(o.Data), "\n")
			c.step("%d lines of output", lines)
		})
		if err != nil {
			return controlapi.ToolResult{}, err
		}
		return controlapi.ToolResult{Text: execText(res), Details: map[string]string{"execId": res.ExecID, "host": res.Machine}}, nil
	}

	// In the background: detached from this call, bounded by its own
	// timeout; the call returns once the agent started it.
	bg := &background{machine: req.Machine, started: time.Now()}
	started := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(timeout*float64(time.Second))+15*time.Second)
		defer cancel()
		res, err := c.f.Exec(bctx, req, func(s controlapi.ExecStarted) {
			bg.mu.Lock()
			bg.id = s.ExecID
			bg.mu.Unlock()
			once.Do(func() { close(started) })
		}, func(o controlapi.ExecOutput) {
			bg.mu.Lock()
			bg.out.write(o.Data)
			bg.mu.Unlock()
		})
		bg.mu.Lock()
		if err != nil {
			bg.err = err
		} else {
			bg.result = &res
		}
		bg.mu.Unlock()
	}()
	select {
	case <-started:
	case <-done:
		if bg.err != nil {
			return controlapi.ToolResult{}, bg.err
		}
	case <-ctx.Done():
		return controlapi.ToolResult{}, ctx.Err()
	}
	bg.mu.Lock()
	id := bg.id
	if id == "" && bg.result != nil {
		id = bg.result.ExecID
	}
	bg.id = id
	bg.mu.Unlock()
	store.add(bg)
	return controlapi.ToolResult{
		Text: fmt.Sprintf("Command %s started on %s in the background. remote_exec_output host=%s execId=%s shows it; "+
			"remote_exec_abort ends it.", id, req.Machine, req.Machine, id),
		Details: map[string]string{"execId": id, "host": req.Machine},
	}, nil
}

// execText is how a command ended and the end of its output.
func execText(r controlapi.ExecResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command %s on %s ", r.ExecID, r.Machine)
	switch {
	case r.TimedOut:
		b.WriteString("timed out")
	case r.Aborted:
		b.WriteString("was aborted")
	case r.ExitCode != nil:
		fmt.Fprintf(&b, "exited with status %d", *r.ExitCode)
	case r.Signal != "":
		fmt.Fprintf(&b, "died of signal %s", label(r.Signal))
	default:
		b.WriteString("could not start (see stderr)")
	}
	fmt.Fprintf(&b, " after %s.\n", (time.Duration(r.DurationMs) * time.Millisecond).Round(time.Millisecond))
	b.WriteString(untrusted("stdout", cutTail(r.Stdout, MaxExecLines, MaxExecChars/2)))
	b.WriteString("\n")
	b.WriteString(untrusted("stderr", cutTail(r.Stderr, MaxExecLines, MaxExecChars/2)))
	return b.String()
}
