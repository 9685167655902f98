//go:build unix

package shim

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// watchdogScript runs as /bin/sh, the leader of the worker's process group
// (see "Process groups and the watchdog" in the package documentation). Its
// stdin is a pipe only the shim holds: when the shim dies, for whatever
// reason and on every unix, read sees EOF and the whole group is torn down,
// SIGTERM first (pi kills its tool process trees on SIGTERM) and SIGKILL
// after the grace. It ignores the catchable signals so that a SIGTERM to the
// group stops the worker but not the watchdog.
const watchdogScript = `trap '' HUP INT QUIT TERM PIPE
read -r _
kill -s TERM 0
%s
kill -s KILL 0
`

// worker is the worker process and the watchdog that leads its process
// group. The shim is the parent of both and reaps both, so the group id it
// signals can never belong to an unrelated process: the watchdog, whose pid
// is the group id, is reaped only after the last signal to the group.
type worker struct {
	watchdog   *exec.Cmd
	watchdogIn *os.File // the shim's end of the watchdog's stdin
	cmd        *exec.Cmd
	pgid       int
	stdin      *os.File // the shim's ends of the worker's pipes
	stdinRaw   syscall.RawConn
	stdout     *os.File
	stderr     *os.File

	mu     sync.Mutex
	reaped bool          // the worker has been waited for
	exited chan struct{} // closed once reaped and the group swept
}

// startWorker starts the watchdog, then the worker in the watchdog's
// process group with pipes for its stdio.
func startWorker(cfg Config) (*worker, error) {
	w := &worker{exited: make(chan struct{})}
	if err := w.startWatchdog(cfg.KillGrace); err != nil {
		return nil, err
	}
	var childEnds []*os.File
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
	fail := func(err error) (*worker, error) {
		closeAll(childEnds...)
		closeAll(w.stdin, w.stdout, w.stderr)
		w.killWatchdog()
		return nil, err
	}
	var stdinR, stdoutW, stderrW *os.File
	var err error
	if stdinR, w.stdin, err = os.Pipe(); err != nil {
		return fail(err)
	}
	childEnds = append(childEnds, stdinR)
	if w.stdinRaw, err = w.stdin.SyscallConn(); err != nil {
		return fail(err)
	}
	if w.stdout, stdoutW, err = os.Pipe(); err != nil {
		return fail(err)
	}
	childEnds = append(childEnds, stdoutW)
	if w.stderr, stderrW, err = os.Pipe(); err != nil {
		return fail(err)
	}
	childEnds = append(childEnds, stderrW)

	w.cmd = exec.Command(cfg.Command[0], cfg.Command[1:]...)
	w.cmd.Dir = cfg.Dir
	w.cmd.Env = cfg.Env
	w.cmd.Stdin, w.cmd.Stdout, w.cmd.Stderr = stdinR, stdoutW, stderrW
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: w.pgid}
	if err := w.cmd.Start(); err != nil {
		return fail(err)
	}
	closeAll(childEnds...)
	return w, nil
}

func (w *worker) startWatchdog(grace time.Duration) error {
	r, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	sleep := ""
	if grace > 0 {
		sleep = fmt.Sprintf("sleep %d", int64(math.Ceil(grace.Seconds())))
	}
	w.watchdog = exec.Command("/bin/sh", "-c", fmt.Sprintf(watchdogScript, sleep))
	w.watchdog.Stdin = r
	w.watchdog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = w.watchdog.Start()
	r.Close()
	if err != nil {
		pw.Close()
		return fmt.Errorf("shim: start watchdog: %w", err)
	}
	w.watchdogIn = pw
	w.pgid = w.watchdog.Process.Pid
	return nil
}

// killWatchdog ends a watchdog whose worker never started.
func (w *worker) killWatchdog() {
	syscall.Kill(-w.pgid, syscall.SIGKILL)
	w.watchdog.Wait()
	w.watchdogIn.Close()
}

// wait waits for the worker to exit, then sweeps its process group with
// SIGKILL (nothing the worker left behind in it survives it) and reaps the
// watchdog. From then on the group id may be reused, so signal refuses.
func (w *worker) wait() *os.ProcessState {
	w.cmd.Wait() // an *exec.ExitError is the normal way for a worker to end
	w.mu.Lock()
	w.reaped = true
	syscall.Kill(-w.pgid, syscall.SIGKILL)
	w.watchdog.Wait()
	w.watchdogIn.Close()
	w.mu.Unlock()
	close(w.exited)
	return w.cmd.ProcessState
}

// signal sends sig to the worker's process group (the watchdog ignores all
// but SIGKILL).
func (w *worker) signal(sig Signal) error {
	s, ok := requestSignals[sig]
	if !ok {
		return fmt.Errorf("%w: %q", ErrBadSignal, sig)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reaped {
		return ErrExited
	}
	return syscall.Kill(-w.pgid, s)
}

func (w *worker) pid() int { return w.cmd.Process.Pid }

// exitStatus describes how a reaped worker ended.
func exitStatus(state *os.ProcessState) ExitStatus {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return ExitStatus{Code: -1, Signal: signalName(ws.Signal())}
	}
	return ExitStatus{Code: state.ExitCode()}
}

var signalNames = map[syscall.Signal]Signal{
	syscall.SIGHUP: "HUP", syscall.SIGINT: "INT", syscall.SIGQUIT: "QUIT",
	syscall.SIGILL: "ILL", syscall.SIGTRAP: "TRAP", syscall.SIGABRT: "ABRT",
	syscall.SIGBUS: "BUS", syscall.SIGFPE: "FPE", syscall.SIGKILL: "KILL",
	syscall.SIGUSR1: "USR1", syscall.SIGSEGV: "SEGV", syscall.SIGUSR2: "USR2",
	syscall.SIGPIPE: "PIPE", syscall.SIGALRM: "ALRM", syscall.SIGTERM: "TERM",
}

func signalName(s syscall.Signal) Signal {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return Signal(fmt.Sprintf("SIG%d", int(s)))
}
