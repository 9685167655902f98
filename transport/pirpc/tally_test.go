package pirpc

import "testing"

func TestTallyCountsEachAssistantMessageOnce(t *testing.T) {
	msg := func(role, stop, text string, cost float64) *Message {
		return &Message{Role: role, StopReason: stop, Content: Content{{Type: "text", Text: text}}, Usage: &Usage{Cost: UsageCost{Total: cost}}}
	}
	partial := msg(RoleAssistant, "", "par", 0.5)
	final := msg(RoleAssistant, StopReasonToolUse, "first", 2)
	events := []*Event{
		{Type: EventMessageEnd, Message: msg(RoleUser, "", "prompt", 0)},
		{Type: EventMessageStart, Message: partial},
		{Type: EventMessageUpdate, Update: &AssistantMessageEvent{Type: "text_delta"}},
		{Type: EventMessageEnd, Message: final},
		{Type: EventToolExecutionStart, Tool: &ToolExecution{ToolName: "write", Args: []byte(`{"path":"a.txt","content":"x"}`)}},
		{Type: EventToolExecutionStart, Tool: &ToolExecution{ToolName: "edit", Args: []byte(`{"path":"a.txt"}`)}},
		{Type: EventToolExecutionStart, Tool: &ToolExecution{ToolName: "bash", Args: []byte(`{"command":"ls"}`)}},
		{Type: EventTurnEnd, Message: final}, // the same message again: not counted
		{Type: EventMessageEnd, Message: msg(RoleAssistant, StopReasonStop, "second", 2)},
		{Type: EventTurnEnd},
		{Type: EventAgentEnd},
	}
	var tl Tally
	for _, ev := range events {
		tl.Observe(ev)
	}
	if tl.Cost != 4 || tl.Turns != 2 || tl.ToolCalls != 3 || tl.FilesChanged() != 1 ||
		tl.LastAssistantText != "second" || tl.LastStopReason != StopReasonStop || !tl.HasAssistant {
		t.Fatalf("tally %+v (files %d)", tl, tl.FilesChanged())
	}
}
