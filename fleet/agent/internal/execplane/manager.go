package execplane

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/transport"
)

// Defaults of Config (reference 1.24).
const (
	DefaultMaxConcurrent = 4
	DefaultTimeout       = 300 * time.Second
	MaxTimeout           = 3600 * time.Second
	DefaultKillGrace     = 500 * time.Millisecond
	ChunkBytes           = 48 << 10
	RecentExecutions     = 50
)

// Config configures a Manager. AuditFile is required.
type Config struct {
	// MaxConcurrent caps running executions (default 4).
	MaxConcurrent int
	// DefaultTimeout applies when a start names none (default 300 s);
	// MaxTimeout caps every timeout (default 3,600 s).
	DefaultTimeout, MaxTimeout time.Duration
	// Roots, when set, are the only directories (and their trees) an
	// execution may run in.
	Roots []string
	// AuditFile is the JSONL audit log, created 0600.
	AuditFile string
	// KillGrace is how long a terminated process group has between
	// SIGTERM and SIGKILL (default 500 ms).
	KillGrace time.Duration
	// Env is the executions' environment (default os.Environ()).
	Env []string
	// Shell runs shell mode: the command is appended (default bash -lc,
	// or sh -lc without bash).
	Shell []string
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger zerolog.Logger
}

// Request is one exec_start.
type Request struct {
	Mode           transport.ExecMode
	Cwd            string
	Command        string   // shell mode
	Executable     string   // argv mode
	Args           []string // argv mode, passed verbatim
	TimeoutSeconds *float64
	// InstanceID and InstanceRoot tie the execution to a worker: the cwd
	// must then lie inside InstanceRoot (the worker's working tree).
	InstanceID, InstanceRoot string
	// Owner is the connection that started it: only it gets the output,
	// and its disconnect aborts the execution (AbortOwner).
	Owner string
}

// Sender delivers an execution's exec_output and exec_exit frames to its
// owner. It may block (the owner's queue is full: output then waits, and
// so does the process once its pipe is full); a frame the owner can no
// longer receive is dropped.
type Sender func(transport.Frame)

// Manager runs executions: the agent's exec plane (reference 1.17).
type Manager struct {
	cfg   Config
	audit *audit
	log   zerolog.Logger

	mu     sync.Mutex
	active []*Execution           // start order
	recent []transport.ExecRecord // newest first, at most RecentExecutions
	closed bool
	wg     sync.WaitGroup
}

// New opens the audit log and returns a manager.
func New(cfg Config) (*Manager, error) {
	if cfg.AuditFile == "" {
		return nil, errors.New("execplane: no audit file")
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = MaxTimeout
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if len(cfg.Shell) == 0 {
		cfg.Shell = defaultShell()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a, err := openAudit(cfg.AuditFile)
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, audit: a, log: cfg.Logger.With().Str("component", "exec").Logger()}, nil
}

// Execution is one started command. Its output does not flow until Run.
type Execution struct {
	m         *Manager
	id        string
	req       Request
	startedAt time.Time
	timeout   time.Duration
	send      Sender

	cmd            *exec.Cmd
	stdout, stderr *os.File // read ends
	spawnErr       error

	mu     sync.Mutex
	end    ending
	killer *time.Timer

	seqMu sync.Mutex
	seq   float64

	runOnce sync.Once
	done    chan struct{}
}

// ID is the execution's id ("x-" and 12 hex digits).
func (e *Execution) ID() string { return e.id }

// StartedAt is when the process was started.
func (e *Execution) StartedAt() time.Time { return e.startedAt }

// Done is closed once the exit was sent and recorded.
func (e *Execution) Done() <-chan struct{} { return e.done }

// Start checks req (reference 1.17's order), records it in the audit log
// and starts the process. A process that cannot be started (a missing
// executable) is still a started execution: Run reports the error on
// stderr and an exit with exitCode null. The caller sends exec_started,
// then calls Run.
func (m *Manager) Start(req Request, send Sender) (*Execution, error) {
	adm := admission{req: req, max: m.cfg.MaxConcurrent, defTimeout: m.cfg.DefaultTimeout, maxTimeout: m.cfg.MaxTimeout}
	if real, err := filepath.EvalSymlinks(req.Cwd); err == nil && filepath.IsAbs(req.Cwd) {
		if st, err := os.Stat(real); err == nil && st.IsDir() {
			adm.cwdReal = real
		}
	}
	if req.InstanceRoot != "" {
		adm.instanceGiven = true
		if real, err := filepath.EvalSymlinks(req.InstanceRoot); err == nil {
			adm.instanceRoot = real
		}
	}
	if len(m.cfg.Roots) > 0 {
		adm.rootsSet = true
		for _, r := range m.cfg.Roots {
			if real, err := filepath.EvalSymlinks(r); err == nil {
				adm.rootsReal = append(adm.rootsReal, real)
			}
		}
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, startErr(CodeClosed, "the exec plane is shutting down")
	}
	adm.active = len(m.active)
	timeout, err := decideStart(adm)
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	e := &Execution{m: m, id: newExecID(), req: req, timeout: timeout, send: send, done: make(chan struct{}),
		startedAt: m.cfg.Now()}
	m.active = append(m.active, e) // the slot is taken before the process exists
	m.wg.Add(1)
	m.mu.Unlock()

	rec := e.auditRecord("start")
	rec.TimeoutMs = float64(timeout.Milliseconds())
	if err := m.audit.write(e.startedAt, rec); err != nil {
		m.release(e, nil, nil)
		return nil, startErr(CodeAudit, "%v", err)
	}
	e.spawnErr = e.startProcess(adm.cwdReal)
	return e, nil
}

func (e *Execution) startProcess(dir string) error {
	var argv []string
	if e.req.Mode == transport.ExecShell {
		argv = append(slices.Clone(e.m.cfg.Shell), e.req.Command)
	} else {
		argv = append([]string{e.req.Executable}, e.req.Args...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, e.m.cfg.Env
	ownGroup(cmd)
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = outW, errW // stdin: /dev/null (closed at once)
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	e.mu.Lock() // an Abort may already look for the process
	e.cmd, e.stdout, e.stderr = cmd, outR, errR
	ended := e.end.aborted || e.end.timedOut
	e.mu.Unlock()
	if ended { // aborted while it was being started
		signalGroup(cmd.Process.Pid, true)
	}
	return nil
}

// Run streams the output and the exit to the sender; it returns at once.
// Only the first call does anything.
func (e *Execution) Run() {
	e.runOnce.Do(func() { go e.run() })
}

func (e *Execution) run() {
	if e.spawnErr != nil {
		e.emit(transport.Stderr, []byte(e.spawnErr.Error()+"\n"))
		e.mu.Lock()
		e.end, _ = decideEnd(e.end, causeExit)
		e.mu.Unlock()
		e.finish(nil)
		return
	}
	timer := time.AfterFunc(e.timeout, func() { e.terminate(causeTimeout) })
	var pumps sync.WaitGroup
	pumps.Go(func() { e.pump(e.stdout, transport.Stdout) })
	pumps.Go(func() { e.pump(e.stderr, transport.Stderr) })
	_ = e.cmd.Wait() // outputs are files: Wait returns when the process exited
	timer.Stop()
	e.mu.Lock()
	e.end, _ = decideEnd(e.end, causeExit)
	if e.killer != nil {
		e.killer.Stop()
	}
	e.mu.Unlock()
	// Whatever the command left running in its group goes with it: no
	// process outlives its execution.
	signalGroup(e.cmd.Process.Pid, true)
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(e.m.cfg.KillGrace):
		// A process that left the group still holds a pipe: stop reading.
		e.stdout.Close()
		e.stderr.Close()
		<-drained
	}
	e.stdout.Close()
	e.stderr.Close()
	e.finish(e.cmd.ProcessState)
}

// pump reads one stream; each read (at most ChunkBytes) is one chunk.
func (e *Execution) pump(r *os.File, s transport.Stream) {
	buf := make([]byte, ChunkBytes)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			e.emit(s, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// emit sends one chunk; the seq counter is shared by both streams and
// frames leave in seq order.
func (e *Execution) emit(s transport.Stream, b []byte) {
	e.seqMu.Lock()
	defer e.seqMu.Unlock()
	f := &transport.ExecOutputFrame{ExecID: e.id, Seq: e.seq, Stream: s, Base64: base64.StdEncoding.EncodeToString(b)}
	e.seq++
	e.send(f)
}

// terminate ends the process group for an abort or a timeout: SIGTERM,
// then SIGKILL after the grace period if it is still running.
func (e *Execution) terminate(c cause) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	next, kill := decideEnd(e.end, c)
	e.end = next
	if !kill || e.cmd == nil {
		return kill
	}
	pid := e.cmd.Process.Pid
	signalGroup(pid, false)
	e.killer = time.AfterFunc(e.m.cfg.KillGrace, func() {
		e.mu.Lock()
		exited := e.end.exited
		e.mu.Unlock()
		if !exited {
			signalGroup(pid, true)
		}
	})
	return true
}

// finish sends the exit, records it and frees the slot.
func (e *Execution) finish(ps *os.ProcessState) {
	now := e.m.cfg.Now()
	e.mu.Lock()
	end := e.end
	e.mu.Unlock()
	exit := &transport.ExecExitFrame{ExecID: e.id, TimedOut: end.timedOut, Aborted: end.aborted,
		DurationMs: float64(now.Sub(e.startedAt).Milliseconds())}
	if ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
			if name, sig := signalName(ws); sig {
				exit.Signal = &name
			}
		}
		if exit.Signal == nil && ps.ExitCode() >= 0 {
			c := float64(ps.ExitCode())
			exit.ExitCode = &c
		}
	}
	fin := float64(now.UnixMilli())
	rec := transport.ExecRecord{ExecID: e.id, Mode: e.req.Mode, Cwd: e.req.Cwd, State: transport.ExecExited,
		StartedAt: float64(e.startedAt.UnixMilli()), FinishedAt: &fin, ExitCode: exit.ExitCode,
		TimedOut: end.timedOut, Aborted: end.aborted}
	ar := e.auditRecord("exit")
	ar.State, ar.FinishedAt, ar.ExitCode, ar.Signal = string(transport.ExecExited), &fin, exit.ExitCode, exit.Signal
	ar.TimedOut, ar.Aborted, ar.DurationMs = end.timedOut, end.aborted, &exit.DurationMs
	if e.spawnErr != nil {
		ar.Error = e.spawnErr.Error()
	}
	if err := e.m.audit.write(now, ar); err != nil {
		e.m.log.Error().Err(err).Str("exec", e.id).Msg("exit not recorded in the audit log")
	}
	// The slot is free and the record listed before the owner learns of
	// the exit: a next start or an exec_list sees it ended.
	e.m.release(e, &rec, func() { e.send(exit) })
	close(e.done)
}

func (e *Execution) auditRecord(event string) auditRecord {
	return auditRecord{Event: event, ExecID: e.id, Mode: string(e.req.Mode), Cwd: e.req.Cwd,
		Command: e.req.Command, Executable: e.req.Executable, Args: e.req.Args,
		InstanceID: e.req.InstanceID, Owner: e.req.Owner, State: string(transport.ExecRunning),
		StartedAt: float64(e.startedAt.UnixMilli())}
}

// release frees e's slot and keeps rec (when given) among the recent,
// then runs then (if any) before Close may return.
func (m *Manager) release(e *Execution, rec *transport.ExecRecord, then func()) {
	defer m.wg.Done()
	m.mu.Lock()
	m.active = slices.DeleteFunc(m.active, func(x *Execution) bool { return x == e })
	if rec != nil {
		m.recent = slices.Insert(m.recent, 0, *rec)
		if len(m.recent) > RecentExecutions {
			m.recent = m.recent[:RecentExecutions]
		}
	}
	m.mu.Unlock()
	if then != nil {
		then()
	}
}

// Abort ends a running execution (its exit reports aborted:true).
func (m *Manager) Abort(id string) error {
	e := m.Running(id)
	if e == nil {
		return ErrUnknownExec
	}
	e.terminate(causeAbort)
	return nil
}

// Running returns the execution id while it runs (nil when it is not
// running).
func (m *Manager) Running(id string) *Execution {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.active {
		if e.id == id {
			return e
		}
	}
	return nil
}

// AbortOwner aborts every execution owner started (its connection is
// gone).
func (m *Manager) AbortOwner(owner string) int {
	m.mu.Lock()
	var mine []*Execution
	for _, e := range m.active {
		if e.req.Owner == owner {
			mine = append(mine, e)
		}
	}
	m.mu.Unlock()
	for _, e := range mine {
		e.terminate(causeAbort)
	}
	return len(mine)
}

// List is the running executions (in start order), then up to 50 recent
// ones, newest first.
func (m *Manager) List() []transport.ExecRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]transport.ExecRecord, 0, len(m.active)+len(m.recent))
	for _, e := range m.active {
		out = append(out, transport.ExecRecord{ExecID: e.id, Mode: e.req.Mode, Cwd: e.req.Cwd,
			State: transport.ExecRunning, StartedAt: float64(e.startedAt.UnixMilli())})
	}
	return append(out, m.recent...)
}

// Close aborts every execution, waits for their exits and closes the
// audit log. Starts are refused from now on.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	all := slices.Clone(m.active)
	m.mu.Unlock()
	for _, e := range all {
		e.terminate(causeAbort)
		e.Run() // a started execution nobody ran still ends
	}
	m.wg.Wait()
	return m.audit.close()
}

func newExecID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "x-" + hex.EncodeToString(b[:])
}
