package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport/pirpc"
)

// transcript prints what happens: the quickstart's own steps, and one line
// per change of the fleet's subscription that a reader cares about (state
// transitions, the worker's tool calls and answers, task_done reports).
// Changes are printed by whoever waits on the subscription, so they appear
// in the order the fleet published them.
type transcript struct {
	mu  sync.Mutex
	out io.Writer
	sub *fleet.Subscription
	// lastStep is the last spawn step printed.
	lastStep string
}

// say prints a line of the quickstart itself.
func (t *transcript) say(format string, args ...any) { t.line("quickstart", format, args...) }

// line prints one line, labelled with who it is about.
func (t *transcript) line(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, "%-10s %s\n", who+":", fmt.Sprintf(format, args...))
}

// show prints c if it is worth a line.
func (t *transcript) show(c fleet.Change) {
	switch c.Kind {
	case fleet.ChangeAgentState:
		t.line("agent", "%s %s → %s (%s)", c.Agent, c.From, c.To, c.Event)
	case fleet.ChangeInstanceState:
		id := c.InstanceID
		if id == "" {
			id = "(new)"
		}
		t.line("instance", "%s %s → %s (%s)", id, c.From, c.To, c.Event)
	case fleet.ChangeSpawnProgress:
		// The agent reports each file fetched; one line per step is
		// enough here.
		step := c.Event
		if c.Message != "" {
			step += ": " + c.Message
		}
		if step != t.lastStep {
			t.lastStep = step
			t.line("spawn", "%s", step)
		}
	case fleet.ChangeEvent:
		t.showWorkerEvent(c.WorkerEvent)
	case fleet.ChangeTaskDone:
		r := c.Report
		t.line("task", "%s done (%s): last message %q", r.TaskID, r.Status, r.LastAssistantMessage)
	case fleet.ChangeEscalated:
		t.line("task", "%s escalated: %s", c.TaskID, c.Message)
	case fleet.ChangeUIRequest:
		t.line("worker", "asks %q (dialog %s)", c.UI.Title, c.UI.RequestID)
	}
}

// showWorkerEvent prints the worker's tool calls and answers.
func (t *transcript) showWorkerEvent(e *fleet.Event) {
	if e == nil {
		return
	}
	// Only these three are shown: the line of any other (a streamed
	// message_update above all) is not read, so the fleet never writes
	// it out.
	switch pirpc.EventType(e.Type) {
	case pirpc.EventToolExecutionStart, pirpc.EventMessageEnd, pirpc.EventAgentSettled:
	default:
		return
	}
	rec, err := pirpc.ParseRecord(e.Raw())
	if err != nil || rec.Event == nil {
		return
	}
	ev := rec.Event
	switch {
	case ev.Type == pirpc.EventToolExecutionStart && ev.Tool != nil:
		t.line("worker", "runs tool %s %s", ev.Tool.ToolName, clip(string(ev.Tool.Args), 100))
	case ev.Type == pirpc.EventMessageEnd && ev.Message != nil && ev.Message.Role == "assistant":
		if text := ev.Message.Text(); text != "" {
			t.line("worker", "says %q", text)
		}
	case ev.Type == pirpc.EventAgentSettled:
		t.line("worker", "settled")
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// errSubscriptionClosed: the fleet closed while the quickstart waited.
var errSubscriptionClosed = errors.New("the fleet's change subscription closed")

// until prints changes until accept takes one, within timeout.
func (t *transcript) until(ctx context.Context, timeout time.Duration, what string, accept func(fleet.Change) bool) error {
	_, err := t.next(ctx, timeout, what, accept)
	return err
}

func (t *transcript) next(ctx context.Context, timeout time.Duration, what string, accept func(fleet.Change) bool) (fleet.Change, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case c, ok := <-t.sub.C:
			if !ok {
				return fleet.Change{}, fmt.Errorf("waiting for %s: %w", what, errSubscriptionClosed)
			}
			t.show(c)
			if accept(c) {
				return c, nil
			}
		case <-timer.C:
			return fleet.Change{}, fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		case <-ctx.Done():
			return fleet.Change{}, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// during runs op (bounded by timeout) while printing changes, then prints
// the changes op caused that are still queued: the fleet publishes a
// change before the call that caused it returns.
func (t *transcript) during(ctx context.Context, timeout time.Duration, what string, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	for {
		select {
		case c, ok := <-t.sub.C:
			if !ok {
				return fmt.Errorf("during %s: %w", what, errors.Join(errSubscriptionClosed, <-done))
			}
			t.show(c)
		case err := <-done:
			t.drain()
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
				return fmt.Errorf("timed out after %s waiting for %s: %w", timeout, what, err)
			}
			return err
		}
	}
}

// drain prints the changes already queued.
func (t *transcript) drain() {
	for {
		select {
		case c, ok := <-t.sub.C:
			if !ok {
				return
			}
			t.show(c)
		default:
			return
		}
	}
}

// taskDone waits for the next task_done report of taskID and returns it.
func (t *transcript) taskDone(ctx context.Context, timeout time.Duration, what, taskID string) (*fleet.TaskReport, error) {
	c, err := t.next(ctx, timeout, what, func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeTaskDone && c.TaskID == taskID
	})
	if err != nil {
		return nil, err
	}
	if c.Report.Status != "settled" {
		return c.Report, fmt.Errorf("%s: the task ended %s, not settled: %s", what, c.Report.Status, strings.TrimSpace(c.Report.Summary))
	}
	return c.Report, nil
}
