package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/eventtext"
)

// WatchCmd is `watch`.
type WatchCmd struct {
	APIFlags `embed:""`
	JSON     bool `help:"Print one JSON change per line (JSONL)." env:"PIFLEET_JSON"`
	Events   bool `help:"Include the workers' transcripts: prompts, thinking, answers, tool calls and results." env:"PIFLEET_WATCH_EVENTS"`
}

// Run prints changes until interrupted or the server stops.
func (c *WatchCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		s, err := cl.Watch(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		if !c.Events {
			s.OmitEventData() // skipped below: not worth writing a streamed update out
		}
		enc := json.NewEncoder(out.Out)
		for {
			ch, err := nextChange(ctx, s)
			if err != nil || ch == nil {
				return err // nil: interrupted
			}
			if ch.Kind == controlapi.ChangeEvent && !c.Events {
				continue
			}
			if c.JSON {
				if err := enc.Encode(ch); err != nil {
					return err
				}
				continue
			}
			for _, line := range describeChange(*ch) {
				if _, err := fmt.Fprintln(out.Out, line); err != nil {
					return err
				}
			}
		}
	})
}

// describeChange is the readable lines of a change: one, or for a worker
// event its transcript lines (none for a streaming step).
func describeChange(ch controlapi.Change) []string {
	head := fmt.Sprintf("%s %-14s", clock(ch.At), ch.Kind)
	subject := ch.InstanceID
	if subject == "" {
		subject = ch.Agent
	}
	if ch.TaskID != "" {
		subject += " task " + ch.TaskID
	}
	if subject != "" {
		head += " " + strings.TrimSpace(subject)
	}
	if ch.Kind == controlapi.ChangeEvent {
		var lines []string
		for _, l := range eventtext.Render(ch.Data, eventtext.Options{MaxLines: 10}) {
			lines = append(lines, head+" "+indentAfterFirst(l.String(), len(head)+1))
		}
		return lines
	}
	var b strings.Builder
	b.WriteString(head)
	switch {
	case ch.Kind == controlapi.ChangeDropped:
		fmt.Fprintf(&b, " %d change(s) lost: this watch was too slow", ch.Count)
	case ch.Kind == controlapi.ChangeTaskDone:
		var d controlapi.TaskDone
		if json.Unmarshal(ch.Data, &d) == nil {
			fmt.Fprintf(&b, " %s: %s", dash(d.Status), dash(oneLine(d.Summary, 120)))
		}
	case ch.Kind == controlapi.ChangeUIRequest:
		var u controlapi.UIRequest
		if json.Unmarshal(ch.Data, &u) == nil {
			fmt.Fprintf(&b, " dialog %s (%s) %q", u.ID, u.Kind, oneLine(u.Title, 60))
			if u.Message != "" {
				fmt.Fprintf(&b, ": %s", oneLine(u.Message, 80))
			}
			if len(u.Options) > 0 {
				fmt.Fprintf(&b, " [%s]", oneLine(strings.Join(u.Options, ", "), 60))
			}
			fmt.Fprintf(&b, " — pifleet-server ui answer %s VALUE", u.ID)
		}
	case ch.Kind == controlapi.ChangeUIEnded:
		var u controlapi.UIRequest
		if json.Unmarshal(ch.Data, &u) == nil {
			fmt.Fprintf(&b, " dialog %s (%s) %q ended without an answer", u.ID, u.Kind, oneLine(u.Title, 60))
		}
	case ch.From != "" || ch.To != "":
		fmt.Fprintf(&b, " %s → %s", dash(ch.From), dash(ch.To))
		if ch.Event != "" {
			fmt.Fprintf(&b, " (%s)", ch.Event)
		}
	case ch.Event != "":
		b.WriteString(" " + ch.Event)
	}
	if ch.Message != "" {
		b.WriteString(": " + oneLine(ch.Message, 100))
	}
	return []string{b.String()}
}

// indentAfterFirst indents every line of s but the first by n spaces.
func indentAfterFirst(s string, n int) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", n))
}

// nextChange reads the next change of a watch stream: nil without an
// error when ctx ended (the user interrupted), and an error saying so
// when the server ended the stream.
func nextChange(ctx context.Context, s *controlapi.Stream) (*controlapi.Change, error) {
	ch, err := s.Next()
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, errors.New("the server closed the stream (stopped?)")
	case err != nil:
		return nil, err
	}
	return &ch, nil
}
