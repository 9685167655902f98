package agent

import (
	"context"
	"errors"
	"path/filepath"

	"example.com/pifleet/fleet/agent/internal/execplane"
	"example.com/pifleet/transport"
)

// Exec error codes.
const (
	CodeExecFailed  = "exec_failed"
	CodeUnknownExec = "unknown_exec"
)

// execStart runs a command for the server (reference 1.17): exec_started
// goes out before any of its output, which then flows to p alone.
func (a *Agent) execStart(ctx context.Context, p *peer, f *transport.ExecStartFrame) {
	if a.exec == nil {
		p.reply(ctx, errorFrame(f, CodeExecDisabled, "the exec plane is off on this agent (it runs with --exec-policy off)"))
		return
	}
	req := execplane.Request{Mode: f.Mode, Cwd: f.Cwd, Command: f.Command, Executable: f.Executable,
		Args: f.Args, TimeoutSeconds: f.TimeoutSeconds, Owner: p.key, InstanceID: f.InstanceID}
	if f.InstanceID != "" {
		in := a.lookup(f.InstanceID)
		if in == nil {
			p.reply(ctx, errorFrame(f, CodeUnknownInstance, "no instance "+f.InstanceID))
			return
		}
		req.InstanceRoot = in.cwd
		if !filepath.IsAbs(req.Cwd) {
			req.Cwd = filepath.Join(in.cwd, req.Cwd)
		}
	}
	send := func(fr transport.Frame) { _ = p.conn.Send(a.runCtx, fr) } // dropped once p is gone
	e, err := a.exec.Start(req, send)
	if err != nil {
		p.reply(ctx, errorFrame(f, CodeExecFailed, err.Error()))
		return
	}
	out := &transport.ExecStartedFrame{ExecID: e.ID(), StartedAt: float64(e.StartedAt().UnixMilli())}
	out.ID = f.ID
	_ = p.conn.Send(a.runCtx, out)
	e.Run()
}

// execAbort kills a running command's process group.
func (a *Agent) execAbort(f *transport.ExecAbortFrame) transport.Frame {
	if a.exec == nil {
		return errorFrame(f, CodeUnknownExec, "no running execution "+f.ExecID)
	}
	if err := a.exec.Abort(f.ExecID); err != nil {
		if errors.Is(err, execplane.ErrUnknownExec) {
			return errorFrame(f, CodeUnknownExec, "no running execution "+f.ExecID)
		}
		return errorFrame(f, CodeInternal, err.Error())
	}
	out := &transport.ExecAbortedFrame{ExecID: f.ExecID}
	out.ID = f.ID
	return out
}

// execList is the running commands, then the 50 most recent.
func (a *Agent) execList(f *transport.ExecListFrame) transport.Frame {
	out := &transport.ExecInstancesFrame{Executions: []transport.ExecRecord{}}
	if a.exec != nil {
		out.Executions = append(out.Executions, a.exec.List()...)
	}
	out.ID = f.ID
	return out
}
