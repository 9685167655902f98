package pirpc

import (
	"encoding/json"
	"slices"
)

// Tally accumulates what a task report needs from a worker's events: the
// last assistant text, turns, tool calls, files changed and cost. It is a
// plain value fed in stdout order; its zero value is ready to use, and a
// new task starts from a new Tally.
type Tally struct {
	// LastAssistantText is the text parts of the most recent message_end
	// with role assistant, joined by LF ("" until one arrives; an
	// assistant message without text resets it to "").
	LastAssistantText string
	// HasAssistant reports whether any assistant message_end was seen.
	HasAssistant bool
	// Turns counts turn_end events.
	Turns int
	// ToolCalls counts tool_execution_start events.
	ToolCalls int
	// Cost sums usage.cost.total of assistant message_end events. Partial
	// messages (message_update) and the copies in turn_end and agent_end
	// are not counted, so nothing is counted twice. Failed attempts that
	// auto-retry replaced are counted: they were billed.
	Cost float64
	// LastStopReason is the stop reason of the latest assistant message.
	LastStopReason string

	files []string
}

// Observe feeds one event.
func (t *Tally) Observe(ev *Event) {
	switch ev.Type {
	case EventMessageEnd:
		m := ev.Message
		if m == nil || m.Role != RoleAssistant {
			return
		}
		t.HasAssistant = true
		t.LastAssistantText = m.Text()
		t.LastStopReason = m.StopReason
		t.Cost += m.Cost()
	case EventTurnEnd:
		t.Turns++
	case EventToolExecutionStart:
		t.ToolCalls++
		if ev.Tool != nil && (ev.Tool.ToolName == "write" || ev.Tool.ToolName == "edit") {
			var args struct {
				Path string `json:"path"`
			}
			if json.Unmarshal(ev.Tool.Args, &args) == nil && args.Path != "" && !slices.Contains(t.files, args.Path) {
				t.files = append(t.files, args.Path)
			}
		}
	}
}

// FilesChanged counts the distinct paths given to the write and edit
// tools.
func (t *Tally) FilesChanged() int { return len(t.files) }
