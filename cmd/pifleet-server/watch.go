package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"example.com/pifleet/fleet/controlapi"
)

// WatchCmd is `watch`.
type WatchCmd struct {
	APIFlags `embed:""`
	JSON     bool `help:"Print one JSON change per line (JSONL)." env:"PIFLEET_JSON"`
	Events   bool `help:"Include every worker event (verbose)." env:"PIFLEET_WATCH_EVENTS"`
}

// Run prints changes until interrupted or the server stops.
func (c *WatchCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		s, err := cl.Watch(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		enc := json.NewEncoder(out.Out)
		for {
			ch, err := s.Next()
			switch {
			case ctx.Err() != nil:
				return nil // interrupted
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				return errors.New("the server closed the stream (stopped?)")
			case err != nil:
				return err
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
			if _, err := fmt.Fprintln(out.Out, describeChange(ch)); err != nil {
				return err
			}
		}
	})
}

// describeChange is one readable line for a change.
func describeChange(ch controlapi.Change) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %-14s", clock(ch.At), ch.Kind)
	subject := ch.InstanceID
	if subject == "" {
		subject = ch.Agent
	}
	if ch.TaskID != "" {
		subject += " task " + ch.TaskID
	}
	if subject != "" {
		b.WriteString(" " + strings.TrimSpace(subject))
	}
	switch {
	case ch.Kind == controlapi.ChangeDropped:
		fmt.Fprintf(&b, " %d change(s) lost: this watch was too slow", ch.Count)
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
	return b.String()
}
