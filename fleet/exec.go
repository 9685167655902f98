package fleet

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// ExecRetainBytes is how much of each stream an Execution keeps for its
// result: the last 512 KiB (the TypeScript server's figure).
const ExecRetainBytes = 512 << 10

// ErrExecFailed: the agent refused to start a command (exec_failed: bad
// cwd, outside its roots, at capacity …) or has its exec plane off
// (exec_disabled). An *ExecError carries the details.
var ErrExecFailed = errors.New("fleet: exec refused")

// ExecError is a command the agent would not run.
type ExecError struct {
	Agent, Code, Message string
}

func (e *ExecError) Error() string {
	return fmt.Sprintf("fleet: exec on %s refused (%s): %s", e.Agent, e.Code, e.Message)
}

// Unwrap makes errors.Is(err, ErrExecFailed) hold.
func (e *ExecError) Unwrap() error { return ErrExecFailed }

// ExecRequest is a command to run on an agent's machine, without a model
// turn: tests, builds, git. Exactly one of Argv (the executable and its
// arguments, no shell) or Shell (a command line for the agent's shell) is
// set.
type ExecRequest struct {
	Argv  []string
	Shell string
	// Cwd is where it runs: an absolute path on the agent's machine, or,
	// for Instance.Exec, a path relative to the worker's working tree
	// ("" is the tree itself).
	Cwd string
	// Timeout ends it (SIGTERM to its process group, then SIGKILL); zero
	// is the agent's default (300 s unless configured), and the agent caps
	// it at one hour.
	Timeout time.Duration
	// OnOutput, when set, receives every chunk in order, from a goroutine
	// of the execution's own (a slow callback holds up only this
	// execution's output, and chunks beyond 8 MiB waiting are dropped and
	// counted in ExecChunk.Dropped).
	OnOutput func(ExecChunk)
	// OnStart, when set, is called with the execution's id once the agent
	// started it, before any OnOutput and on the same goroutine.
	OnStart func(execID string)
}

// ExecChunk is one piece of a command's output. Data is the command's
// raw bytes: untrusted, like everything a worker machine produces.
type ExecChunk struct {
	Seq    int
	Stream transport.Stream
	Data   []byte
	// Dropped counts the chunks before this one that a slow OnOutput
	// lost.
	Dropped int
}

// ExecResult is how a command ended, with the last ExecRetainBytes of
// each stream.
type ExecResult struct {
	ExecID string
	// ExitCode is nil when the process died of a signal (Signal) or could
	// not be started (the reason is on Stderr).
	ExitCode *int
	Signal   string
	TimedOut bool
	Aborted  bool
	Duration time.Duration
	Stdout   []byte
	Stderr   []byte
	// StdoutTruncated and StderrTruncated say that the stream was longer
	// than what is kept.
	StdoutTruncated, StderrTruncated bool
}

// Execution is a command running on an agent.
type Execution struct {
	f     *Fleet
	agent string
	id    string

	mu       sync.Mutex
	res      ExecResult
	err      error
	done     chan struct{}
	onOutput func(ExecChunk)
	onStart  func(string)
	queue    []ExecChunk
	queued   int // bytes in queue
	dropped  int
	wake     chan struct{}
	drained  chan struct{}
	ended    bool
}

// ID is the agent's execution id.
func (e *Execution) ID() string { return e.id }

// Agent is the machine it runs on.
func (e *Execution) Agent() string { return e.agent }

// Done is closed when the command ended (or its agent was lost).
func (e *Execution) Done() <-chan struct{} { return e.done }

// Wait waits for the end of the command. An agent connection lost
// meanwhile is an ErrNotConnected error (the agent aborts the command).
// When OnOutput is set, Wait returns after the last chunk was delivered.
func (e *Execution) Wait(ctx context.Context) (ExecResult, error) {
	// An ended command's result wins over a done context: select alone
	// would pick between the two at random.
	if err := waitOrCtx(ctx, e.done); err != nil {
		return ExecResult{}, err
	}
	if e.drained != nil {
		if err := waitOrCtx(ctx, e.drained); err != nil {
			return ExecResult{}, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	res := e.res
	res.Stdout, res.Stderr = slices.Clone(res.Stdout), slices.Clone(res.Stderr)
	return res, e.err
}

// waitOrCtx waits for c to close; ctx's error only when c is still open.
func waitOrCtx(ctx context.Context, c <-chan struct{}) error {
	select {
	case <-c:
		return nil
	default:
	}
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		select {
		case <-c:
			return nil
		default:
			return ctx.Err()
		}
	}
}

// Abort ends the command (its process group); the result then reports
// Aborted. Aborting a command that already ended is not an error.
func (e *Execution) Abort(ctx context.Context) error {
	err := e.f.AbortExecution(ctx, e.agent, e.id)
	if errors.Is(err, ErrUnknownExecution) {
		select {
		case <-e.done:
			return nil // it ended before the abort arrived
		default:
		}
	}
	return err
}

// ErrUnknownExecution: an abort of a command that is not running.
var ErrUnknownExecution = errors.New("fleet: no such running command")

// AbortExecution aborts command execID of agent machine, whoever started
// it (trust policy steer required).
func (f *Fleet) AbortExecution(ctx context.Context, machine, execID string) error {
	f.mu.Lock()
	_, c, err := f.connForLocked(machine, trust.OpSteer)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.requestTimeout())
	defer cancel()
	ans, err := c.Request(ctx, &transport.ExecAbortFrame{ExecID: execID})
	var re *transport.RemoteError
	switch {
	case errors.As(err, &re) && re.Code == "unknown_exec":
		return fmt.Errorf("%w: %s on %s", ErrUnknownExecution, execID, machine)
	case errors.As(err, &re):
		return &ExecError{Agent: machine, Code: re.Code, Message: re.Message}
	case err != nil:
		return err
	}
	if _, ok := ans.(*transport.ExecAbortedFrame); !ok {
		return wrongAnswer("exec_abort", (*transport.ExecAbortedFrame)(nil), ans)
	}
	return nil
}

// Exec runs a command on agent machine (trust policy steer required; the
// agent must run with its exec plane on). It returns once the agent
// started it; Wait for the result.
func (f *Fleet) Exec(ctx context.Context, machine string, req ExecRequest) (*Execution, error) {
	return f.exec(ctx, machine, "", req)
}

// Exec runs a command in the worker's working tree (for an isolated
// worker, its git worktree): req.Cwd is relative to it and may not leave
// it. A pifleet agent is required.
func (i *Instance) Exec(ctx context.Context, req ExecRequest) (*Execution, error) {
	i.f.mu.Lock()
	inst, a, _, err := i.f.lookupLocked(i.id, trust.OpSteer)
	var machine string
	if err == nil {
		machine = inst.agent
		if !a.pifleet {
			err = fmt.Errorf("%w: %s (exec in an instance's tree)", ErrNotSupported, a.name)
		}
	}
	i.f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return i.f.exec(ctx, machine, i.id, req)
}

func (f *Fleet) exec(ctx context.Context, machine, instanceID string, req ExecRequest) (*Execution, error) {
	fr := &transport.ExecStartFrame{Cwd: req.Cwd, InstanceID: instanceID}
	switch {
	case len(req.Argv) > 0 && req.Shell == "":
		fr.Mode, fr.Executable, fr.Args = transport.ExecArgv, req.Argv[0], slices.Clone(req.Argv[1:])
	case len(req.Argv) == 0 && req.Shell != "":
		fr.Mode, fr.Command = transport.ExecShell, req.Shell
	default:
		return nil, &ConfigError{Field: "ExecRequest", Reason: "exactly one of Argv or Shell must be set"}
	}
	if instanceID == "" && fr.Cwd == "" {
		return nil, &ConfigError{Field: "ExecRequest.Cwd", Reason: "empty (it must be an absolute path on the agent's machine)"}
	}
	if req.Timeout < 0 {
		return nil, &ConfigError{Field: "ExecRequest.Timeout", Reason: fmt.Sprintf("%v is negative", req.Timeout)}
	}
	if req.Timeout > 0 {
		fr.TimeoutSeconds = new(req.Timeout.Seconds())
	}
	e := &Execution{f: f, agent: machine, done: make(chan struct{}), onOutput: req.OnOutput, onStart: req.OnStart}
	if e.onOutput == nil && e.onStart != nil {
		e.onOutput = func(ExecChunk) {}
	}
	if e.onOutput != nil {
		e.wake, e.drained = make(chan struct{}, 1), make(chan struct{})
	}
	f.mu.Lock()
	a, c, err := f.connForLocked(machine, trust.OpSteer)
	if err == nil && !a.announces(transport.CapabilityExec) {
		err = &ExecError{Agent: machine, Code: "exec_disabled", Message: "the agent's exec plane is off (start it with --exec-policy full)"}
	}
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	// The answer is handled on the connection's goroutine, in order with
	// the output that follows it: registered there, no chunk is missed.
	abandoned := false // the caller stopped waiting (f.mu)
	w, err := f.requestLocked(a, c, fr, func(ans transport.Frame) {
		if s, ok := ans.(*transport.ExecStartedFrame); ok {
			if abandoned { // nobody will read it: it is not left running
				_ = c.TrySend(&transport.ExecAbortFrame{ExecID: s.ExecID})
				return
			}
			e.id = s.ExecID
			e.res.ExecID = s.ExecID
			if a.execs == nil {
				a.execs = map[string]*Execution{}
			}
			a.execs[s.ExecID] = e
		}
	})
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ans, err := await(ctx, w)
	if err != nil {
		f.mu.Lock()
		abandoned = true
		if e.id != "" { // started just as the caller gave up
			delete(a.execs, e.id)
			_ = c.TrySend(&transport.ExecAbortFrame{ExecID: e.id})
		}
		f.mu.Unlock()
		return nil, err
	}
	switch ans := ans.(type) {
	case *transport.ExecStartedFrame:
		if e.onOutput != nil {
			go e.deliver()
		}
		return e, nil
	case *transport.ErrorFrame:
		return nil, &ExecError{Agent: machine, Code: ans.Code, Message: ans.Message}
	default:
		return nil, wrongAnswer("exec_start", (*transport.ExecStartedFrame)(nil), ans)
	}
}

// Executions lists agent machine's running commands, then its recent
// ones, newest first.
func (f *Fleet) Executions(ctx context.Context, machine string) ([]transport.ExecRecord, error) {
	f.mu.Lock()
	_, c, err := f.connForLocked(machine, trust.OpView)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.requestTimeout())
	defer cancel()
	ans, err := c.Request(ctx, &transport.ExecListFrame{})
	if err != nil {
		return nil, err
	}
	l, ok := ans.(*transport.ExecInstancesFrame)
	if !ok {
		return nil, wrongAnswer("exec_list", (*transport.ExecInstancesFrame)(nil), ans)
	}
	return l.Executions, nil
}

// maxExecQueue bounds the output waiting for a slow OnOutput.
const maxExecQueue = 8 << 20

// onExecOutputLocked keeps a chunk (f.mu held, the connection's goroutine).
func (f *Fleet) onExecOutputLocked(a *agentState, fr *transport.ExecOutputFrame) {
	e := a.execs[fr.ExecID]
	if e == nil {
		return
	}
	data, err := base64.StdEncoding.DecodeString(fr.Base64)
	if err != nil {
		f.log.Warn().Str("agent", a.name).Str("exec", fr.ExecID).Msg("exec output that is not base64 dropped")
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if fr.Stream == transport.Stderr {
		e.res.Stderr, e.res.StderrTruncated = retain(e.res.Stderr, data, e.res.StderrTruncated)
	} else {
		e.res.Stdout, e.res.StdoutTruncated = retain(e.res.Stdout, data, e.res.StdoutTruncated)
	}
	if e.onOutput == nil {
		return
	}
	for e.queued+len(data) > maxExecQueue && len(e.queue) > 0 {
		e.queued -= len(e.queue[0].Data)
		e.queue = e.queue[1:]
		e.dropped++
	}
	e.queue = append(e.queue, ExecChunk{Seq: int(fr.Seq), Stream: fr.Stream, Data: data})
	e.queued += len(data)
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// retain appends data to buf, keeping the last ExecRetainBytes.
func retain(buf, data []byte, truncated bool) ([]byte, bool) {
	buf = append(buf, data...)
	if over := len(buf) - ExecRetainBytes; over > 0 {
		buf = append(buf[:0:0], buf[over:]...)
		truncated = true
	}
	return buf, truncated
}

// onExecExitLocked ends the execution (f.mu held).
func (f *Fleet) onExecExitLocked(a *agentState, fr *transport.ExecExitFrame) {
	e := a.execs[fr.ExecID]
	if e == nil {
		return
	}
	delete(a.execs, fr.ExecID)
	e.mu.Lock()
	if fr.ExitCode != nil {
		e.res.ExitCode = new(int(*fr.ExitCode))
	}
	if fr.Signal != nil {
		e.res.Signal = *fr.Signal
	}
	e.res.TimedOut, e.res.Aborted = fr.TimedOut, fr.Aborted
	e.res.Duration = time.Duration(fr.DurationMs) * time.Millisecond
	e.endLocked(nil)
	e.mu.Unlock()
}

// execsLostLocked fails the agent's executions: its connection is gone
// (and the agent aborts what the connection owned).
func (f *Fleet) execsLostLocked(a *agentState) {
	for id, e := range a.execs {
		delete(a.execs, id)
		e.mu.Lock()
		e.endLocked(fmt.Errorf("%w: %s lost while command %s ran (the agent aborts it)", ErrNotConnected, a.name, id))
		e.mu.Unlock()
	}
}

func (e *Execution) endLocked(err error) {
	if e.ended {
		return
	}
	e.ended, e.err = true, err
	close(e.done)
	if e.wake != nil {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// deliver hands queued chunks to OnOutput in order until the end.
func (e *Execution) deliver() {
	defer close(e.drained)
	if e.onStart != nil {
		e.onStart(e.id)
	}
	for {
		e.mu.Lock()
		q, dropped, ended := e.queue, e.dropped, e.ended
		e.queue, e.queued, e.dropped = nil, 0, 0
		e.mu.Unlock()
		for i, c := range q {
			if i == 0 {
				c.Dropped = dropped
			}
			e.onOutput(c)
		}
		if len(q) > 0 {
			continue
		}
		if ended {
			return
		}
		<-e.wake
	}
}
