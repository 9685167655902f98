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

// The hand-written encoders of strings, floats, parts and usage write what
// json.Marshal writes.
func FuzzAppendJSONMatchesMarshal(f *testing.F) {
	f.Add("plain", 0.5, 3, "")
	f.Add("a <b> & \u2028\u2029 \x00\x1f\x7f \b\f\n\r\t \"q\" \\ é \xff\xfe", 1e-7, -2, `{"x" : "<y>"}`)
	f.Add("", 1e21, 1<<40, "[1, 2]")
	f.Add("\xed\xa0\x80 surrogate", -123456789.125e-30, 0, "null")
	f.Fuzz(func(t *testing.T, s string, x float64, n int, args string) {
		text := s
		p := part{Type: s, Text: &text, ID: s, Name: s}
		if json.Valid([]byte(args)) {
			p.Arguments = json.RawMessage(args)
		}
		values := []any{s, x, n, int64(n), n%2 == 0, []part{p, thinkingPart(s)}, part{Type: "x"},
			&usage{Input: n, Output: -n, TotalTokens: n / 3, Cost: usageCost{Input: x, Output: x / 3, Total: -x}}}
		for i, v := range values {
			want, werr := json.Marshal(v)
			got, gerr := appendJSON(nil, v)
			if (werr != nil) != (gerr != nil) {
				t.Fatalf("value %d (%#v): Marshal error %v, appendJSON error %v", i, v, werr, gerr)
			}
			if werr == nil && string(got) != string(want) {
				t.Fatalf("value %d (%#v):\n got %s\nwant %s", i, v, got, want)
			}
		}
	})
}
