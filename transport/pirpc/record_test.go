package pirpc

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRecordResponses(t *testing.T) {
	tests := []struct {
		line string
		want Response
	}{
		{`{"id":"a","type":"response","command":"prompt","success":true}`,
			Response{ID: "a", Command: "prompt", Success: true}},
		{`{"id":"b","type":"response","command":"get_last_assistant_text","success":true,"data":{"text":null}}`,
			Response{ID: "b", Command: "get_last_assistant_text", Success: true, Data: json.RawMessage(`{"text":null}`)}},
		{`{"type":"response","command":"get_entries","success":false,"error":"Unknown command: get_entries"}`,
			Response{Command: "get_entries", Error: "Unknown command: get_entries"}},
		{`{"type":"response","command":"parse","success":false,"error":"Failed to parse command: Unexpected token"}`,
			Response{Command: "parse", Error: "Failed to parse command: Unexpected token"}},
	}
	for _, tc := range tests {
		rec, err := ParseRecord([]byte(tc.line))
		if err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		if rec.Event != nil || rec.Response == nil {
			t.Fatalf("%s: not a response", tc.line)
		}
		if diff := cmp.Diff(tc.want, *rec.Response); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.line, diff)
		}
	}
}

func TestResponseErrors(t *testing.T) {
	unknown := &Response{Command: "get_tree", Error: "Unknown command: get_tree"}
	err := unknown.Err()
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("%v is not ErrUnsupported", err)
	}
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Command != "get_tree" {
		t.Fatalf("errors.As: %v", err)
	}
	failed := &Response{Command: "set_session_name", Error: "Session name cannot be empty"}
	if err := failed.Err(); errors.Is(err, ErrUnsupported) || err.Error() != "pi set_session_name: Session name cannot be empty" {
		t.Fatalf("err = %v", err)
	}
	if (&Response{Success: true}).Err() != nil {
		t.Fatal("success has an error")
	}
}

func TestParseRecordEvents(t *testing.T) {
	tests := []struct {
		line string
		want Event
	}{
		{`{"type":"agent_start"}`, Event{Type: EventAgentStart}},
		{`{"type":"message_end","message":{"role":"user","content":"plain","timestamp":5}}`,
			Event{Type: EventMessageEnd, Message: &Message{Role: "user", Content: Content{{Type: "text", Text: "plain"}}, Timestamp: 5}}},
		{`{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"a"},{"type":"toolCall","id":"t1","name":"bash","arguments":{"command":"ls"}},{"type":"text","text":"b"}],"usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0.5,"cacheRead":0,"cacheWrite":0,"total":0.5}},"stopReason":"toolUse"}}`,
			Event{Type: EventMessageEnd, Message: &Message{Role: "assistant", StopReason: "toolUse",
				Content: Content{{Type: "thinking", Thinking: "hm"}, {Type: "text", Text: "a"},
					{Type: "toolCall", ID: "t1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}, {Type: "text", Text: "b"}},
				Usage: &Usage{Input: 1, Output: 2, TotalTokens: 3, Cost: UsageCost{Output: 0.5, Total: 0.5}}}}},
		{`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"he","partial":{"role":"assistant"}},"message":{"role":"assistant","content":[]}}`,
			Event{Type: EventMessageUpdate, Update: &AssistantMessageEvent{Type: "text_delta", Delta: "he"}}},
		{`{"type":"tool_execution_end","toolCallId":"t1","toolName":"bash","result":{"content":[]},"isError":true}`,
			Event{Type: EventToolExecutionEnd, Tool: &ToolExecution{ToolCallID: "t1", ToolName: "bash", IsError: true}}},
		{`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"503 overloaded"}`,
			Event{Type: EventAutoRetryStart, Retry: &AutoRetry{Attempt: 1, MaxAttempts: 3, DelayMs: 2000, ErrorMessage: "503 overloaded"}}},
		{`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"503 overloaded"}`,
			Event{Type: EventAutoRetryEnd, Retry: &AutoRetry{Attempt: 3, FinalError: "503 overloaded"}}},
		{`{"type":"compaction_end","reason":"overflow","aborted":false,"willRetry":true}`,
			Event{Type: EventCompactionEnd, Compaction: &Compaction{Reason: "overflow", WillRetry: true}}},
		{`{"type":"extension_ui_request","id":"u1","method":"confirm","title":"faux-ui","message":"Proceed?","timeout":500}`,
			Event{Type: EventExtensionUIRequest, UIRequest: &UIRequest{ID: "u1", Method: "confirm", Title: "faux-ui", Message: "Proceed?", Timeout: 500}}},
		{`{"type":"queue_update","steering":["a"],"followUp":[]}`,
			Event{Type: EventQueueUpdate, Queue: &QueueUpdate{Steering: []string{"a"}, FollowUp: []string{}}}},
		{`{"type":"session_info_changed","name":"n"}`, Event{Type: EventSessionInfoChanged, SessionName: "n"}},
		{`{"type":"thinking_level_changed","level":"high"}`, Event{Type: EventThinkingLevelChanged, ThinkingLevel: "high"}},
		{`{"type":"extension_error","extensionPath":"/x.ts","event":"tool_call","error":"boom"}`,
			Event{Type: EventExtensionError, ExtensionError: &ExtensionError{ExtensionPath: "/x.ts", Event: "tool_call", Error: "boom"}}},
		{`{"type":"agent_settled","aborted":true}`, Event{Type: EventAgentSettled, Aborted: true}},
		{`{"type":"some_future_event","x":[1,2]}`, Event{Type: "some_future_event"}},
	}
	for _, tc := range tests {
		rec, err := ParseRecord([]byte(tc.line))
		if err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		if rec.Response != nil || rec.Event == nil {
			t.Fatalf("%s: not an event", tc.line)
		}
		if diff := cmp.Diff(tc.want, *rec.Event); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.line, diff)
		}
		if string(rec.Raw) != tc.line {
			t.Errorf("Raw changed: %s", rec.Raw)
		}
	}
}

func TestParseRecordKeepsEventsWithOddFields(t *testing.T) {
	// A field of an unexpected type spoils the typed view, not delivery.
	rec, err := ParseRecord([]byte(`{"type":"message_end","message":{"role":7}}`))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Event.Type != EventMessageEnd || rec.Event.DecodeErr == nil {
		t.Fatalf("got %+v", rec.Event)
	}
	rec, err = ParseRecord([]byte(`{"type":"tool_execution_start","toolName":{"x":1}}`))
	if err != nil || rec.Event.Type != EventToolExecutionStart || rec.Event.DecodeErr == nil {
		t.Fatalf("got %+v, %v", rec.Event, err)
	}
}

func TestParseRecordRejectsNonRecords(t *testing.T) {
	for _, line := range []string{`not json`, `[1,2]`, `"str"`, `{}`, `{"type":3}`, `{"type":null}`,
		`{"type":"response","command":"x","success":"yes"}`, `{"type":"response","id":5,"success":true}`} {
		_, err := ParseRecord([]byte(line))
		var re *RecordError
		if !errors.As(err, &re) {
			t.Errorf("%s: err = %v, want *RecordError", line, err)
		}
	}
}

func TestMessageText(t *testing.T) {
	m := Message{Content: Content{{Type: "thinking", Thinking: "x"}, {Type: "text", Text: "one"}, {Type: "toolCall"}, {Type: "text", Text: "two"}}}
	if got := m.Text(); got != "one\ntwo" {
		t.Fatalf("Text = %q", got)
	}
	if (&Message{}).Cost() != 0 {
		t.Fatal("cost of a message without usage")
	}
}

func TestEncodeCommand(t *testing.T) {
	tests := []struct {
		id   string
		cmd  Command
		want string
	}{
		{"1", GetState{}, `{"id":"1","type":"get_state"}`},
		{"", Abort{}, `{"type":"abort"}`},
		{"p\"q", Prompt{Message: "hi\nthere", StreamingBehavior: StreamingFollowUp}, `{"id":"p\"q","type":"prompt","message":"hi\nthere","streamingBehavior":"followUp"}`},
		{"x", SetModel{Provider: "faux", ModelID: "faux-1"}, `{"id":"x","type":"set_model","provider":"faux","modelId":"faux-1"}`},
		{"", ExtensionUIResponse{ID: "u", Confirmed: new(true)}, `{"type":"extension_ui_response","id":"u","confirmed":true}`},
		{"r", RawCommand{Type: "get_entries", Fields: json.RawMessage(` {"since":"ab12"} `)}, `{"id":"r","type":"get_entries","since":"ab12"}`},
		{"r", RawCommand{Type: "get_tree"}, `{"id":"r","type":"get_tree"}`},
	}
	for _, tc := range tests {
		got, err := EncodeCommand(tc.id, tc.cmd)
		if err != nil {
			t.Fatalf("%T: %v", tc.cmd, err)
		}
		if string(got) != tc.want {
			t.Errorf("%T: got %s, want %s", tc.cmd, got, tc.want)
		}
	}
	if _, err := EncodeCommand("1", RawCommand{Type: "x", Fields: json.RawMessage(`[1]`)}); err == nil {
		t.Error("a non-object raw command was encoded")
	}
}

// TestParseRecordRealTranscript parses a transcript written by the real pi
// 0.73.1 (offline, with testdata/pi/faux-provider.ts): every line must
// parse without a decode error.
func TestParseRecordRealTranscript(t *testing.T) {
	f, err := os.Open("testdata/pi-0.73.1-transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		rec, err := ParseRecord(sc.Bytes())
		if err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		if rec.Event != nil && rec.Event.DecodeErr != nil {
			t.Fatalf("line %d: %v", n+1, rec.Event.DecodeErr)
		}
		n++
	}
	if n < 50 {
		t.Fatalf("only %d lines in the transcript", n)
	}
}

// FuzzParseRecord: never panics, and a parsed record keeps its bytes and
// has exactly one of Event and Response.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{
		`{"type":"agent_start"}`,
		`{"id":"1","type":"response","command":"get_state","success":true,"data":{"isStreaming":false}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"x"}],"usage":{"cost":{"total":1}}}}`,
		`{"type":"message_end","message":{"role":"user","content":"s"}}`,
		`{"type":"extension_ui_request","id":"u","method":"confirm","message":"m"}`,
		`{"type":"auto_retry_end","success":true,"attempt":1}`,
		`{"type":"response","command":"x","success":false,"error":"Unknown command: x"}`,
	} {
		f.Add([]byte(s))
	}
	addTranscriptSeeds(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseRecord(line)
		if err != nil {
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if (rec.Event == nil) == (rec.Response == nil) {
			t.Fatalf("record %q: event %v, response %v", line, rec.Event, rec.Response)
		}
		if string(rec.Raw) != string(line) {
			t.Fatal("Raw differs from the input")
		}
		if rec.Event != nil {
			if rec.Event.Message != nil {
				_ = rec.Event.Message.Text()
			}
			var d SettleDetector
			d.OnEvent(rec.Event)
			var tally Tally
			tally.Observe(rec.Event)
		}
	})
}

// AC: WithDelta gives for a message_update with another delta what
// ParseRecord gives, escapes and invalid UTF-8 decoded as the parse does,
// and refuses records without a step and deltas that are no string.
func TestWithDeltaReadsAsTheParse(t *testing.T) {
	const line = `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":2,"delta":%s,"partial":{}},"message":{}}`
	prev, err := ParseRecord([]byte(strings.Replace(line, "%s", `"a"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, delta := range []string{`"b"`, `"é🚀"`, `"\n\"\\\u00e9\ud83d\ude80"`, "\"\xff\xed\xa0\xbd\"", `"\ud800"`} {
		raw := []byte(strings.Replace(line, "%s", delta, 1))
		want, err := ParseRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := prev.WithDelta(raw, []byte(delta))
		if !ok || !cmp.Equal(got, want) {
			t.Errorf("delta %s: WithDelta = %+v, %v; ParseRecord %+v", delta, got.Event.Update, ok, want.Event.Update)
		}
	}
	for _, delta := range []string{`1`, `"\x"`, `"`, ``} {
		if _, ok := prev.WithDelta(nil, []byte(delta)); ok {
			t.Errorf("delta %q taken", delta)
		}
	}
	resp, _ := ParseRecord([]byte(`{"type":"response","command":"prompt","success":true}`))
	start, _ := ParseRecord([]byte(`{"type":"agent_start"}`))
	for _, r := range []Record{resp, start, {}} {
		if _, ok := r.WithDelta(nil, []byte(`"b"`)); ok {
			t.Errorf("%+v: WithDelta of a record with no step", r)
		}
	}
}
