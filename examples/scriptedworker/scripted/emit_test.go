package scripted

import (
	"encoding/json"
	"testing"
)

// The one-pass encoder writes exactly what json.Marshal writes for the
// same record (compact, HTML-escaped, U+2028 escaped, nil members left
// out), nested messages and entries included.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	text := "a <b> & \u2028 é \"q\"\n"
	msg := &message{Role: "assistant", Content: []part{textPart(text), {Type: "toolCall", ID: "c1", Name: "bash",
		Arguments: json.RawMessage(`{ "command" : "echo <hi>" }`)}}, API: "pifleet-faux", Provider: "faux",
		Model: "faux-1", Usage: &usage{}, StopReason: "stop", Timestamp: 1}
	user := &message{Role: "user", Content: []part{textPart("hi")}, Timestamp: 2}
	records := []any{
		obj{{"type", "agent_end"}, {"messages", []*message{user, msg}}},
		obj{{"type", "message_update"}, {"assistantMessageEvent", obj{{"type", "text_delta"}, {"partial", msg}}},
			{"message", msg}, {"absent", (*message)(nil)}, {"weird key\"<", 1}},
		&entry{Type: "message", ID: "e1", ParentID: "e0", Timestamp: "2026-01-01T00:00:00.000Z", Message: msg},
		&entry{raw: json.RawMessage(`{"type":"label", "x" : 1}`)},
		response("7", "get_state", obj{{"model", nil}, {"raw", jsonNull}}),
	}
	for i, r := range records {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendJSON(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
}
