package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"example.com/pifleet/internal/shim"
	"example.com/pifleet/transport/pirpc"
)

// detachTimeout bounds Detach's round trip to the shim.
const detachTimeout = 5 * time.Second

// Events returns the worker's events in order. It is closed after the
// worker's Exit event, or at Detach. Read it continuously: a line is
// acknowledged to the shim only once its event was taken, and the shim
// holds back output beyond its window (Stop and Restart wait for the
// exit, which comes through the same stream).
func (w *Worker) Events() <-chan Event { return w.events }

// Done is closed once the Worker has let go of everything: after its
// Exit event was delivered and its shim reaped, or after Detach.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Send writes one rpc command from the server to the worker, verbatim
// (compacted to one line), after every earlier Send. With the model
// pinned, set_model and cycle_model are refused with ErrModelPinned.
func (w *Worker) Send(raw json.RawMessage) error {
	typ, err := commandType(raw)
	if err != nil {
		return err
	}
	w.mu.Lock()
	pin, g, gone := w.pin, w.gen, w.finished || w.detached
	w.mu.Unlock()
	if pin != nil && (typ == pirpc.SetModel{}.CommandType() || typ == pirpc.CycleModel{}.CommandType()) {
		return fmt.Errorf("%w: %s refused (pinned to %s)", ErrModelPinned, typ, pin)
	}
	if gone || g == nil {
		return ErrNotRunning
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	buf.WriteByte('\n')
	prompt := typ == pirpc.Prompt{}.CommandType()
	if prompt {
		// Before the write: the run may start (and its agent_start be
		// read) before Write returns.
		w.mu.Lock()
		w.promptSent = true
		w.mu.Unlock()
	}
	if err := g.c.Write(context.Background(), buf.Bytes()); err != nil {
		if errors.Is(err, shim.ErrExited) || errors.Is(err, shim.ErrStdinClosed) {
			return fmt.Errorf("%w: %w", ErrNotRunning, err)
		}
		return fmt.Errorf("worker %s: send %s: %w", w.spec.InstanceID, typ, err)
	}
	return nil
}

// Since returns the events after seq still held in the ring, the seq of
// the oldest one held, and gap = true when events after seq were already
// dropped from the ring.
func (w *Worker) Since(seq uint64) (events []Event, firstSeq uint64, gap bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ring.since(seq)
}

// AnswerUI answers a waiting dialog: value is a bool (confirm) or a
// string (select, input, editor); cancelled cancels it. An unknown or
// already settled dialog gives ErrUnknownDialog.
func (w *Worker) AnswerUI(requestID string, value any, cancelled bool) error {
	w.mu.Lock()
	d := w.dialogs[requestID]
	if d == nil {
		w.mu.Unlock()
		return fmt.Errorf("%w: %q", ErrUnknownDialog, requestID)
	}
	line, err := dialogResponse(requestID, d.ui.Kind, value, cancelled)
	if err != nil {
		w.mu.Unlock()
		return err
	}
	delete(w.dialogs, requestID)
	d.timer.Stop()
	outcome := OutcomeAnswered
	if cancelled || value == nil {
		outcome = OutcomeCancelled
	}
	w.outcomes = append(w.outcomes, DialogOutcome{requestID, d.ui.Kind, d.ui.Title, outcome})
	g := w.gen
	w.mu.Unlock()
	return g.c.Write(context.Background(), append(line, '\n'))
}

// SetModelPin pins the worker's model (pin true) or lifts the pin. While
// pinned, Send refuses set_model and cycle_model, and a model found
// changed after a settle is set back (Event.Drift.Restored).
func (w *Worker) SetModelPin(provider, id string, pin bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pin {
		w.pin = &pinnedModel{provider, id}
	} else {
		w.pin = nil
	}
}

// Stop ends the worker the way pi-rpc.md says is safe: a busy worker is
// aborted first and the end of its run awaited (closing stdin on a busy pi
// orphans the running tool), then stdin is closed; a worker still alive
// after StopGrace gets SIGTERM on its whole process group (pi kills its
// tool trees), and SIGKILL after another StopGrace: forced is then true.
// The Exit event follows; Stop returns once the Worker has let go of
// everything (Done: the Exit taken from Events, the shim reaped), so that
// none of its goroutines outlives it. Events must therefore be read by
// another goroutine meanwhile. Stopping a worker that already ended sends
// it nothing and returns forced false once Done.
func (w *Worker) Stop(ctx context.Context) (forced bool, err error) {
	forced, err = w.stop(ctx)
	if err != nil {
		return forced, err
	}
	select {
	case <-w.done:
		return forced, nil
	case <-ctx.Done():
		return forced, ctx.Err()
	}
}

func (w *Worker) stop(ctx context.Context) (forced bool, err error) {
	w.mu.Lock()
	g := w.gen
	if w.detached {
		w.mu.Unlock()
		return false, ErrNotRunning
	}
	if g == nil || g.exit != nil {
		w.mu.Unlock()
		return false, nil
	}
	w.fireLocked(OnStop)
	// A prompt sent whose agent_start is not read yet counts as busy: the
	// worker may already run its tools, which only an abort ends.
	busy := w.runOpen || w.promptSent || w.detector.Phase() != pirpc.PhaseIdle
	var aborted chan struct{}
	if busy {
		aborted = make(chan struct{})
		w.callLocked(g, pirpc.Abort{}, func(*pirpc.Response, uint64) []Event {
			close(aborted)
			return nil
		})
	}
	grace := w.spec.StopGrace
	w.mu.Unlock()

	// wait reports whether ch closed or the worker exited within grace.
	wait := func(ch <-chan struct{}) (bool, error) {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-ch:
			return true, nil
		case <-g.exited:
			return true, nil
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if busy {
		if ok, err := wait(aborted); err != nil {
			return false, err
		} else if !ok {
			w.log.Warn().Msg("abort not answered in time; closing stdin anyway")
		} else {
			// The abort's answer follows agent_end; the settle follows
			// its get_state barrier, which EOF would cut short. The run
			// may have opened only after Stop began.
			w.mu.Lock()
			runDone := w.runDone
			open := w.runOpen
			w.mu.Unlock()
			if open && runDone != nil {
				if _, err := wait(runDone); err != nil {
					return false, err
				}
			}
		}
	}
	if err := g.c.CloseStdin(ctx); err != nil && !errors.Is(err, shim.ErrExited) && !errors.Is(err, shim.ErrStdinClosed) {
		w.log.Warn().Err(err).Msg("close stdin")
	}
	if ok, err := wait(g.exited); ok || err != nil {
		return false, err
	}
	w.log.Warn().Msg("worker still alive after stdin closed: SIGTERM to its process group")
	if err := g.c.Signal(ctx, shim.SignalTerm); err != nil && !errors.Is(err, shim.ErrExited) {
		w.log.Warn().Err(err).Msg("SIGTERM")
	}
	if ok, err := wait(g.exited); ok || err != nil {
		return true, err
	}
	w.log.Warn().Msg("worker survived SIGTERM: SIGKILL to its process group")
	if err := g.c.Signal(ctx, shim.SignalKill); err != nil && !errors.Is(err, shim.ErrExited) {
		w.log.Warn().Err(err).Msg("SIGKILL")
	}
	select {
	case <-g.exited:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// Restart stops the worker gracefully and starts spec.Command again on the
// same session file (--session <file> replaces the command's own session
// flags), under a new shim: same instance id, history kept, new resources.
// Budget totals carry over. The old process's exit is not reported; the
// event seqs keep increasing. When spec does not start, the previous spec
// is started again on the session: Restart then returns a *RestartError
// with Restored set, and the worker runs as before. When that fails too
// (RestartError without Restored), the worker has exited: its Exit event
// follows.
func (w *Worker) Restart(ctx context.Context, spec Spec) error {
	spec.InstanceID = w.spec.InstanceID
	if spec.StateDir == "" {
		spec.StateDir = w.spec.StateDir
	}
	if len(spec.ShimCommand) == 0 {
		spec.ShimCommand = w.spec.ShimCommand
	}
	if err := spec.validate(); err != nil {
		return err
	}
	spec = spec.withDefaults()
	w.mu.Lock()
	if w.detached || w.finished {
		w.mu.Unlock()
		return ErrNotRunning
	}
	path := w.sessionPath
	if path == "" {
		w.mu.Unlock()
		return ErrNoSession
	}
	w.restarting = true
	w.mu.Unlock()

	if _, err := w.stop(ctx); err != nil {
		w.mu.Lock()
		w.restarting = false
		w.mu.Unlock()
		return fmt.Errorf("worker %s: restart: %w", spec.InstanceID, err)
	}
	w.mu.Lock()
	prev := w.spec
	base := w.nextBaseLocked()
	spec.Log = w.spec.Log
	w.spec = spec
	w.budget.limit = spec.Budget
	w.mu.Unlock()

	err := w.launch(ctx, withSession(spec.Command, path), base)
	if err != nil && ctx.Err() == nil {
		// The new spec does not start (an extension that throws at load, a
		// flag pi refuses): the previous one comes back on the same
		// session, so that a failed restart leaves the worker as it was.
		w.log.Warn().Err(err).Msg("the restarted worker did not start; starting the previous spec again")
		w.mu.Lock()
		base = w.nextBaseLocked()
		w.spec = prev
		w.budget.limit = prev.Budget
		w.mu.Unlock()
		rerr := w.launch(ctx, withSession(prev.Command, path), base)
		if rerr == nil {
			w.mu.Lock()
			w.restarting = false
			w.mu.Unlock()
			return &RestartError{InstanceID: spec.InstanceID, Err: err, Restored: true}
		}
		err = fmt.Errorf("%w; the previous spec did not start again either: %w", err, rerr)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.restarting = false
	if err != nil {
		x := &Exit{Code: -1}
		var se *StartError
		if errors.As(err, &se) {
			x = &se.Exit
		}
		w.fireLocked(OnExited)
		w.endLocked()
		w.emitLocked(nil, 0, Event{Seq: w.nextBaseLocked() + 1, Kind: KindExit, Exit: x})
		w.closeQueueLocked()
		return &RestartError{InstanceID: spec.InstanceID, Err: err}
	}
	return nil
}

// nextBaseLocked is the seq base of the next generation: past every seq
// the current one produced, so that seqs keep increasing.
func (w *Worker) nextBaseLocked() uint64 {
	g := w.gen
	base := g.base + g.exitSeq
	if g.last > base {
		base = g.last
	}
	return base
}

// withSession returns command with its session flags replaced by
// --session path.
func withSession(command []string, path string) []string {
	out := make([]string, 0, len(command)+2)
	for i := 0; i < len(command); i++ {
		a := command[i]
		switch {
		case i > 0 && (a == "--session" || a == "--fork" || a == "--session-dir"):
			i++ // and its value
		case i > 0 && (a == "--no-session" || a == "--continue" || a == "-c" || a == "--resume" || a == "-r" ||
			strings.HasPrefix(a, "--session=") || strings.HasPrefix(a, "--fork=") || strings.HasPrefix(a, "--session-dir=")):
		default:
			out = append(out, a)
		}
	}
	return append(out, "--session", path)
}

// Snapshot reports the worker's current state and figures.
func (w *Worker) Snapshot() Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.machine.State()
	return Snapshot{
		InstanceID:        w.spec.InstanceID,
		Pid:               w.pid,
		State:             st,
		SessionPath:       w.sessionPath,
		Model:             w.model,
		Cost:              w.budget.cost,
		Turns:             w.budget.turns,
		ToolCalls:         w.toolCalls,
		Busy:              w.runOpen,
		LastAssistantText: w.lastText,
		StderrTail:        w.stderrTail,
		BudgetExceeded:    w.budget.breached,
	}
}

// Persisted returns what the daemon must store to Adopt the worker later.
func (w *Worker) Persisted() Persisted {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := Persisted{InstanceID: w.spec.InstanceID, SessionPath: w.sessionPath, Pid: w.pid}
	if g := w.gen; g != nil {
		p.Socket, p.Token, p.SeqBase = g.socket, g.token, g.base
	}
	w.qmu.Lock()
	p.LastSeq, p.RunOpen = w.lastSeq, w.delivOpen
	w.qmu.Unlock()
	return p
}

// Detach lets go of the worker without stopping it (the agent is shutting
// down; the worker outlives it under its shim). Events closes; events not
// yet taken are delivered again to the Worker that Adopts it. A dialog
// still waiting gets its safe default, since nobody could answer it.
//
// Detach returns promptly whatever state the worker is in (its round trip
// to the shim is bounded by detachTimeout), once the Worker's own
// goroutines have ended; it does not wait for the shim process to go
// away, not even the one of a worker that has exited. What can outlive
// it is the goroutine of internal/shim that reaps a shim this process
// launched: the shim of a running worker is meant to outlive the agent,
// and only its parent can reap it when it does exit.
func (w *Worker) Detach() {
	w.mu.Lock()
	if w.detached {
		w.mu.Unlock()
		return
	}
	w.detached = true
	g := w.gen
	var answers [][]byte
	for id, d := range w.dialogs {
		d.timer.Stop()
		delete(w.dialogs, id)
		answers = append(answers, safeDefault(id, d.ui.Kind))
	}
	if w.runTimer != nil {
		w.runTimer.Stop()
	}
	if w.waitTimer != nil {
		w.waitTimer.Stop()
	}
	w.mu.Unlock()

	close(w.stopDeliv)
	<-w.delivDone
	if g != nil {
		ctx, cancel := context.WithTimeout(context.Background(), detachTimeout)
		for _, line := range answers {
			g.c.Write(ctx, append(line, '\n'))
		}
		if err := g.c.Detach(ctx); err != nil {
			w.log.Debug().Err(err).Msg("detach")
		}
		cancel()
	}
	w.wg.Wait()
}
