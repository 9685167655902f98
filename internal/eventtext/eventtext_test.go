package eventtext

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRender(t *testing.T) {
	for name, tc := range map[string]struct {
		raw  string
		want []string
	}{
		"user prompt": {`{"type":"message_end","message":{"role":"user","content":"fix the bug"}}`, []string{"user: fix the bug"}},
		"assistant thinks and says": {`{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"look at main.go"},{"type":"text","text":"Fixed.\nTests pass."},{"type":"toolCall","id":"c1","name":"bash","arguments":{}}]}}`,
			[]string{"thinking: look at main.go", "says: Fixed.\n      Tests pass."}},
		"tool call": {`{"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{ "command" : "go test ./..." }}`,
			[]string{`tool: bash {"command":"go test ./..."}`}},
		"tool result": {`{"type":"tool_execution_end","toolCallId":"faux_0_1","toolName":"bash","result":{"content":[{"type":"text","text":"hi\nerr\n"}]},"isError":false}`,
			[]string{"result: bash: hi\n        err"}},
		"tool error": {`{"type":"tool_execution_end","toolCallId":"x","toolName":"nosuch","result":{"content":[{"type":"text","text":"Tool nosuch not found"}]},"isError":true}`,
			[]string{"error: nosuch: Tool nosuch not found"}},
		"escape sequences": {`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"\u001b]0;owned\u0007done\u001b[2J"}]}}`,
			[]string{"says: done"}},
		"streaming steps": {`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"x"}}`, nil},
		"turn":            {`{"type":"turn_start"}`, nil},
		"settled":         {`{"type":"agent_settled"}`, []string{"worker: settled"}},
		"not json":        {`nope`, nil},
		"model error": {`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"rate limited"}}`,
			[]string{"error: rate limited"}},
	} {
		var got []string
		for _, l := range Render([]byte(tc.raw), Options{}) {
			got = append(got, l.String())
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestRenderBoundsLongText(t *testing.T) {
	long := strings.Repeat("line\\n", 50)
	lines := Render([]byte(`{"type":"tool_execution_end","toolName":"bash","result":{"content":[{"type":"text","text":"`+long+`"}]}}`), Options{MaxLines: 3})
	if len(lines) != 1 || !strings.HasSuffix(lines[0].Text, "line\nline\nline\n… 47 more line(s)") {
		t.Errorf("long result: %+v", lines)
	}
	args := `{"type":"tool_execution_start","toolName":"write","args":{"content":"` + strings.Repeat("é", 300) + `"}}`
	lines = Render([]byte(args), Options{MaxArgs: 51})
	if len(lines) != 1 || !strings.HasSuffix(lines[0].Text, "…") || len(lines[0].Text) > 70 || !strings.Contains(lines[0].Text, "é") {
		t.Errorf("long args: %+v", lines)
	}
}

// Whatever a worker writes, the rendering has no terminal control
// character and never panics.
func FuzzRender(f *testing.F) {
	f.Add(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"\u001b[31mx"}]}}`)
	f.Add(`{"type":"tool_execution_end","toolName":"a\u0007","result":{"content":"x"}}`)
	f.Add(`{"type":"tool_execution_start","toolName":"bash","args":"\u009b"}`)
	f.Fuzz(func(t *testing.T, raw string) {
		for _, l := range Render([]byte(raw), Options{}) {
			for _, r := range l.String() {
				if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
					t.Fatalf("%q rendered with control character %U: %q", raw, r, l)
				}
			}
		}
	})
}
