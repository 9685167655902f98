// Package eventtext renders a pi worker's events as the lines of a
// transcript a person reads: what the user asked, what the model thought
// and said, which tools it ran with which arguments, and what they
// answered. The streaming steps (message_update, tool_execution_update,
// turn boundaries, agent_end, which a retry repeats) are left out: the
// message and the tool's end carry their whole text, and agent_settled
// says the run is over.
//
// Everything an event carries was written by a model or by a tool it ran,
// so it is untrusted: every line is passed through termsafe.Clean.
package eventtext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"example.com/pifleet/internal/termsafe"
	"example.com/pifleet/transport/pirpc"
)

// Options shape the rendering.
type Options struct {
	// MaxLines bounds the lines of one text block (a message, a tool
	// result); 0 means 20. The rest is summarised as "… N more lines".
	MaxLines int
	// MaxArgs bounds a tool call's arguments, in bytes; 0 means 200.
	MaxArgs int
}

func (o Options) maxLines() int {
	if o.MaxLines <= 0 {
		return 20
	}
	return o.MaxLines
}

func (o Options) maxArgs() int {
	if o.MaxArgs <= 0 {
		return 200
	}
	return o.MaxArgs
}

// Line is one entry of a transcript: who speaks (user, thinking, says,
// tool, result, error, worker) and the text, which may span lines.
type Line struct {
	Who, Text string
}

// String renders the line as "who: text", continuation lines indented.
func (l Line) String() string {
	prefix := l.Who + ": "
	return prefix + strings.ReplaceAll(l.Text, "\n", "\n"+strings.Repeat(" ", len(prefix)))
}

// Render returns the transcript lines of one pi event (raw, as the worker
// wrote it); none for the events a reader does not need.
func Render(raw []byte, o Options) []Line {
	rec, err := pirpc.ParseRecord(raw)
	if err != nil || rec.Event == nil {
		return nil
	}
	ev := rec.Event
	switch ev.Type {
	case pirpc.EventMessageEnd:
		if ev.Message == nil {
			return nil
		}
		return renderMessage(ev.Message, o)
	case pirpc.EventToolExecutionStart:
		if ev.Tool == nil {
			return nil
		}
		return []Line{{"tool", clean(ev.Tool.ToolName) + " " + clip(clean(compact(ev.Tool.Args)), o.maxArgs())}}
	case pirpc.EventToolExecutionEnd:
		if ev.Tool == nil {
			return nil
		}
		who := "result"
		if ev.Tool.IsError {
			who = "error"
		}
		text := resultText(raw)
		if text == "" {
			text = "(no output)"
		}
		return []Line{{who, clean(ev.Tool.ToolName) + ": " + block(text, o)}}
	case pirpc.EventAgentSettled:
		if ev.Aborted {
			return []Line{{"worker", "settled (aborted)"}}
		}
		return []Line{{"worker", "settled"}}
	case pirpc.EventAutoRetryStart:
		if r := ev.Retry; r != nil {
			return []Line{{"worker", fmt.Sprintf("retrying (attempt %d of %d): %s", r.Attempt, r.MaxAttempts, clean(oneLine(r.ErrorMessage)))}}
		}
	case pirpc.EventCompactionStart:
		return []Line{{"worker", "compacting the context"}}
	case pirpc.EventCompactionEnd:
		return []Line{{"worker", "context compacted"}}
	case pirpc.EventExtensionUIRequest:
		if u := ev.UIRequest; u != nil && u.Method != "notify" && u.Method != "setStatus" && u.Method != "setWidget" && u.Method != "setTitle" {
			return []Line{{"dialog", clean(oneLine(u.Title + " " + u.Message))}}
		}
	case pirpc.EventExtensionError:
		if e := ev.ExtensionError; e != nil {
			return []Line{{"error", "extension: " + clean(oneLine(e.Error))}}
		}
	}
	return nil
}

func renderMessage(m *pirpc.Message, o Options) []Line {
	var lines []Line
	switch m.Role {
	case "user":
		if t := m.Text(); t != "" {
			lines = append(lines, Line{"user", block(t, o)})
		}
	case "assistant":
		for _, p := range m.Content {
			switch p.Type {
			case "thinking":
				if strings.TrimSpace(p.Thinking) != "" {
					lines = append(lines, Line{"thinking", block(p.Thinking, o)})
				}
			case "text":
				if strings.TrimSpace(p.Text) != "" {
					lines = append(lines, Line{"says", block(p.Text, o)})
				}
			}
		}
		if m.StopReason == "error" && m.ErrorMessage != "" {
			lines = append(lines, Line{"error", clean(oneLine(m.ErrorMessage))})
		}
	}
	return lines
}

// resultText is the text of a tool_execution_end's result.
func resultText(raw []byte) string {
	var ev struct {
		Result struct {
			Content pirpc.Content `json:"content"`
		} `json:"result"`
	}
	if json.Unmarshal(raw, &ev) != nil {
		return ""
	}
	m := pirpc.Message{Content: ev.Result.Content}
	return m.Text()
}

// block cleans a text and keeps its first lines.
func block(s string, o Options) string {
	s = strings.TrimRight(clean(s), "\n")
	lines := strings.Split(s, "\n")
	if n := o.maxLines(); len(lines) > n {
		more := len(lines) - n
		lines = append(lines[:n], fmt.Sprintf("… %d more line(s)", more))
	}
	return strings.Join(lines, "\n")
}

func clean(s string) string { return termsafe.Clean(s) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xc0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}
