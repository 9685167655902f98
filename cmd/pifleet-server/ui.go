package main

import (
	"context"
	"encoding/json"
	"fmt"

	"example.com/pifleet/fleet/controlapi"
)

// UICmd groups the worker-dialog commands.
type UICmd struct {
	Answer UIAnswerCmd `cmd:"" help:"Answer a worker dialog (see status or watch for pending ones)."`
}

// UIAnswerCmd is `ui answer`.
type UIAnswerCmd struct {
	APIFlags `embed:""`
	Request  string `arg:"" help:"Dialog request id."`
	Value    string `arg:"" help:"true or false (confirm), null (cancel), or text (select, input); a JSON string literal (\"true\") sends text that looks like those."`
}

// Run answers.
func (c *UIAnswerCmd) Run(out *Output) error {
	v := uiValue(c.Value)
	return simple(&c.APIFlags, out, fmt.Sprintf("answered %s: %s", c.Request, v), func(ctx context.Context, cl *controlapi.Client) error {
		return cl.UIAnswer(ctx, c.Request, v)
	})
}

// uiValue reads a dialog answer: true, false, null and JSON string
// literals as JSON, anything else as text.
func uiValue(s string) json.RawMessage {
	switch s {
	case "true", "false", "null":
		return json.RawMessage(s)
	}
	var str string
	if json.Unmarshal([]byte(s), &str) == nil {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
