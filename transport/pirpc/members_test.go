package pirpc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	"example.com/pifleet/internal/jsonscan/jsontest"
)

// fuzzSeeds are lines of every shape ParseRecord meets, odd ones included.
func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		`{"type":"agent_start"}`,
		` {"type" : "turn_start" } `,
		`{"id":"1","type":"response","command":"get_state","success":true,"data":{"isStreaming":false,"n":[1,-2.5e-3,true,null]}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"x"}],"usage":{"cost":{"total":1}}}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"é\u2028"},"message":{}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":"x"}}`,
		`{"type":"message_update","AssistantMessageEvent":{"type":"a"},"assistantMessageEvent":{"type":"b"}}`,
		`{"type":"extension_ui_request","id":"u","method":"confirm","message":"m","options":["a","b"],"timeout":1e3}`,
		`{"type":"auto_retry_end","success":true,"attempt":1,"finalError":"x\"y"}`,
		`{"type":"auto_retry_start","attempt":1.5}`,
		`{"type":"response","command":"x","success":false,"error":"Unknown command: x"}`,
		`{"Type":"agent_end","type":"agent_start"}`,
		`{"type":"a","type":"b"}`,
		`{"ty\u0070e":"agent_start"}`,
		`{"type":null}`, `{"type":1}`, `[]`, `{"type":"x"} x`, `{"type":"x",}`, `{"a":01}`, `{"a":"\x01"}`,
		`{"type":"queue_update","steering":["s"],"followUp":null}`,
		"{\"type\":\"x\",\"name\":\"\xff\xfe\"}",
		`{"type":"session_info_changed","name":"n","ſ":1}`,
		`{"type":"message_start","message":{"role":"user","content":"hi \u00e9","timestamp":1.5}}`,
		`{"type":"message_start","message":{"Role":"user","content":[]}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[null,{"type":"toolCall","id":"c","name":"bash","arguments":{"a":[1]}},{"Text":"x"}],"usage":null}}`,
		`{"type":"message_end","message":{"role":"assistant","content":null,"usage":{"input":1,"cost":null,"totalTokens":2.5}}}`,
		`{"type":"turn_end","message":{"role":"assistant","content":[{"type":"text","text":"a","text":"b"}],"usage":{"cost":{"total":"x"}}}}`,
		`{"type":"turn_end","message":[1]}`,
		`{"type":"message_update","assistantMessageEvent":null}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":null,"contentIndex":1e1}}`,
		// The message_update path: the message is the partial again, or
		// nearly.
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"a","partial":{"x":"a"}},"message":{"x":"a"}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"a","partial":{"x":"a"}},"message":{"x":"b"}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"a","partial":{"x":"a"}},"message":{"x":"a"}} `,
		`{"type":"message_update","assistantMessageEvent":{"partial":{"x":1},"partial":{"x":1}},"message":{"x":1}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"x","p\u0061rtial":{"x":1}},"message":{"x":1}}`,
		`{"type":"message_update","assistantMessageEvent":{"Type":"x","delta":1,"partial":{"x":1}},"message":{"x":1}}`,
		`{"type":"message_update","assistantMessageEvent":{"partial":"\ud800"},"message":"\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	addTranscriptSeeds(f)
}

// FuzzJSON: ParseRecord (the fast path where it applies) returns exactly
// what encoding/json alone returns. It shares its corpus with the
// scanner's other front ends (see jsontest), plus pi's own lines.
func FuzzJSON(f *testing.F) {
	jsontest.Seed(f)
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		got, gerr := ParseRecord(line)
		want, werr := parseStd(line)
		if !reflect.DeepEqual(gerr, werr) {
			t.Fatalf("%q: error %v, encoding/json alone %v", line, gerr, werr)
		}
		if !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Fatalf("%q:\n got %#v\nwant %#v", line, describe(got), describe(want))
		}
		// Told the bytes are valid, the parser must agree on valid ones,
		// and on any others return without panicking.
		vgot, verr := ParseValidRecord(line) // must not panic, whatever line is
		if json.Valid(line) {
			if !reflect.DeepEqual(verr, werr) || !reflect.DeepEqual(normalize(vgot), normalize(want)) {
				t.Fatalf("%q: ParseValidRecord\n got %#v, %v\nwant %#v, %v", line, describe(vgot), verr, describe(want), werr)
			}
		}
	})
}

// normalize makes empty raw members comparable (encoding/json copies them,
// the fast path keeps them as spans of the line).
func normalize(r Record) Record {
	if r.Event != nil && r.Event.Tool != nil && len(r.Event.Tool.Args) == 0 {
		r.Event.Tool.Args = nil
	}
	return r
}

func describe(r Record) any {
	out := map[string]any{"raw": string(r.Raw)}
	if r.Event != nil {
		out["event"] = *r.Event
		if r.Event.Update != nil {
			out["update"] = *r.Event.Update
		}
		if r.Event.Message != nil {
			out["message"] = *r.Event.Message
		}
	}
	if r.Response != nil {
		out["response"] = *r.Response
	}
	return out
}

// The fast path is taken for pi's own lines (a regression guard: falling
// back silently would only show as lost speed).
func TestParseFastTakesPiLines(t *testing.T) {
	raw, err := os.ReadFile("testdata/pi-0.73.1-transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		for _, valid := range []bool{false, true} {
			if _, ok := parseFast(line, valid); !ok {
				t.Errorf("line %d (valid %v) fell back to encoding/json: %.120s", i+1, valid, line)
			}
		}
		// A message_update is validated once, not once per copy of its
		// partial message.
		if _, ok := parseUpdateLine(line); ok != bytes.HasPrefix(line, updateLinePrefix) {
			t.Errorf("line %d: the message_update path took it: %v: %.120s", i+1, ok, line)
		}
	}
}

// Response.Decode of a State (fast where it can be) gives what
// encoding/json gives.
func FuzzDecodeStateMatchesStd(f *testing.F) {
	for _, s := range []string{
		`{"model":{"id":"faux-1","name":"Faux 1","api":"pifleet-faux","provider":"faux","baseUrl":"http://x","reasoning":true,"input":["text","image"],"cost":{"input":1.5,"output":0,"cacheRead":0,"cacheWrite":0},"contextWindow":128000,"maxTokens":16384},"thinkingLevel":"medium","isStreaming":false,"isCompacting":false,"steeringMode":"one-at-a-time","followUpMode":"one-at-a-time","sessionFile":"/s/x.jsonl","sessionId":"0190","sessionName":null,"autoCompactionEnabled":true,"messageCount":2,"pendingMessageCount":0}`,
		`{"model":null,"isStreaming":true}`, `null`, ``, `{"Model":{}}`, `{"model":{"input":[null,"a"],"cost":null}}`,
		`{"messageCount":1.5}`, `{"model":{"input":[1]}}`, `{"isStreaming":"yes"}`, `[]`, `{"model":{"id":"a","id":"b"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want State
		gerr := (&Response{Command: "get_state", Data: data}).Decode(&got)
		in := data
		if len(in) == 0 {
			in = []byte("null")
		}
		werr := json.Unmarshal(in, &want)
		if (gerr == nil) != (werr == nil) || gerr != nil && !reflect.DeepEqual(errors.Unwrap(gerr), werr) {
			t.Fatalf("%q: error %v, encoding/json %v", data, gerr, werr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
		}
		if got.Model != nil && !reflect.DeepEqual(*got.Model, *want.Model) {
			t.Fatalf("%q: model\n got %+v\nwant %+v", data, *got.Model, *want.Model)
		}
	})
}

// addTranscriptSeeds adds the first lines of a real pi transcript.
func addTranscriptSeeds(f *testing.F) {
	if raw, err := os.ReadFile("testdata/pi-0.73.1-transcript.jsonl"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 1<<20)
		for i := 0; sc.Scan() && i < 40; i++ {
			f.Add(append([]byte(nil), sc.Bytes()...))
		}
	}
}
