//go:build unix

package shim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Start launches a shim for a new worker and attaches to it. The shim runs
// detached, in its own session, so it outlives this process; Start reaps it
// if it ends while this process lives (see ShimExited). Readiness is
// event-driven: the shim writes one line on a pipe once its socket listens
// and the worker runs. If the worker cannot start, Start returns the shim's
// *RemoteError (code spawn, config, socket_in_use, …) and nothing is left
// running. A shim that dies before it is attached (killed while it
// starts) gives an error matching ErrNoShim, as Attach does. When ctx
// ends before the shim is ready, the shim stops its worker, and Start
// returns once both have ended.
func Start(ctx context.Context, cfg StartConfig) (*Client, error) {
	if cfg.Executable == "" {
		return nil, &ConfigError{"executable", "empty"}
	}
	if err := cfg.Shim.validate(); err != nil {
		return nil, err
	}
	// Fail early on a path this platform cannot reach.
	if err := withShortPath(cfg.Shim.Socket, func(string) error { return nil }); err != nil {
		return nil, err
	}
	config, err := json.Marshal(cfg.Shim)
	if err != nil {
		return nil, err
	}
	var logFile *os.File
	if cfg.LogPath != "" {
		if logFile, err = os.OpenFile(cfg.LogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			return nil, fmt.Errorf("shim: open log: %w", err)
		}
		defer logFile.Close()
	}
	configR, configW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		configR.Close()
		configW.Close()
		return nil, err
	}
	defer readyR.Close()

	cmd := exec.Command(cfg.Executable, cfg.Args...)
	cmd.ExtraFiles = []*os.File{configR, readyW} // fds 3 and 4
	if logFile != nil {
		cmd.Stderr = logFile
	}
	// A session of its own: no controlling terminal, no SIGHUP or ^C from
	// the agent's terminal, not in the agent's process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	configR.Close()
	readyW.Close()
	if err != nil {
		configW.Close()
		return nil, fmt.Errorf("shim: launch %s: %w", cfg.Executable, err)
	}
	sp := &shimProcess{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(sp.exited)
	}()
	// stop ends a shim that is not attached yet, and its worker if one
	// runs. SIGTERM makes the shim stop its worker's process group and reap
	// it before it exits; a SIGKILL would leave the worker to the watchdog,
	// which takes it down only some time after Start returned. SIGKILL is
	// for a shim that does not end within its worker's kill grace.
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		grace := cfg.Shim.KillGrace
		if grace == 0 {
			grace = DefaultKillGrace
		}
		t := time.NewTimer(grace + 5*time.Second)
		defer t.Stop()
		select {
		case <-sp.exited:
		case <-t.C:
			cmd.Process.Kill()
			<-sp.exited
		}
	}
	go func() {
		configW.Write(config) // a shim that died early is seen on the ready pipe
		configW.Close()
	}()

	type result struct {
		line readyLine
		err  error
	}
	ready := make(chan result, 1)
	go func() {
		var r result
		line, err := bufio.NewReader(io.LimitReader(readyR, maxControlFrame)).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &r.line)
		}
		r.err = err
		ready <- r
	}()
	var r result
	select {
	case r = <-ready:
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
	switch {
	case r.err != nil:
		stop()
		if errors.Is(r.err, io.EOF) {
			return nil, fmt.Errorf("%w: %s exited before it was ready (%s)", ErrNoShim, cfg.Executable, cmd.ProcessState)
		}
		return nil, fmt.Errorf("shim: bad readiness line: %w", r.err)
	case r.line.Error != nil:
		<-sp.exited
		return nil, r.line.Error
	case r.line.Ready == nil:
		stop()
		return nil, errors.New("shim: readiness line says neither ready nor error")
	}

	c, err := Attach(ctx, AttachConfig{
		Socket:     cfg.Shim.Socket,
		InstanceID: cfg.Shim.InstanceID,
		Token:      cfg.Shim.Token,
		Logger:     cfg.Logger,
	})
	if err != nil {
		stop()
		return nil, err
	}
	c.shim = sp
	return c, nil
}
