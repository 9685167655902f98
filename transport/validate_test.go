package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// TestValidationOrderAndMessages pins the check order of reference 1.3 and
// the messages the error frame carries.
func TestValidationOrderAndMessages(t *testing.T) {
	cases := []struct {
		name, rec string
		code      ErrorCode
		msg       string
		frameType string
	}{
		{"truncated", `{"v":1,"type":"list"`, CodeInvalidJSON, "record is not valid JSON", ""},
		{"whitespace only", " \t ", CodeInvalidJSON, "record is not valid JSON", ""},
		{"lone CR after CR removal", "\r", CodeInvalidJSON, "record is not valid JSON", ""},
		{"trailing garbage", `{"v":1,"type":"list"} x`, CodeInvalidJSON, "record is not valid JSON", ""},
		{"invalid array is invalid_json first", `[1,`, CodeInvalidJSON, "record is not valid JSON", ""},
		{"single quotes", `{'v':1}`, CodeInvalidJSON, "record is not valid JSON", ""},
		{"trailing comma", `{"v":1,"type":"list",}`, CodeInvalidJSON, "record is not valid JSON", ""},
		{"leading zero", `{"v":01,"type":"list"}`, CodeInvalidJSON, "record is not valid JSON", ""},
		{"raw control char in string", "{\"v\":1,\"type\":\"li\x01st\"}", CodeInvalidJSON, "record is not valid JSON", ""},
		{"bad escape", `{"v":1,"type":"l\ist"}`, CodeInvalidJSON, "record is not valid JSON", ""},
		{"byte order mark", "\uFEFF{\"v\":1,\"type\":\"list\"}", CodeInvalidJSON, "record is not valid JSON", ""},
		{"array", `[{"v":1,"type":"list"}]`, CodeNotAnObject, "frame is not a JSON object", ""},
		{"null", `null`, CodeNotAnObject, "frame is not a JSON object", ""},
		{"no type", `{"v":1}`, CodeUnknownFrameType, "frame has no string type", ""},
		{"numeric type", `{"v":1,"type":7}`, CodeUnknownFrameType, "frame has no string type", ""},
		{"type before version", `{"v":2,"type":"teleport"}`, CodeUnknownFrameType, `unknown frame type "teleport"`, "teleport"},
		{"toString is not a type", `{"v":1,"type":"toString"}`, CodeUnknownFrameType, `unknown frame type "toString"`, "toString"},
		{"__proto__ is not a type", `{"v":1,"type":"__proto__"}`, CodeUnknownFrameType, `unknown frame type "__proto__"`, "__proto__"},
		{"constructor is not a type", `{"v":1,"type":"constructor"}`, CodeUnknownFrameType, `unknown frame type "constructor"`, "constructor"},
		{"wrong case", `{"v":1,"type":"List"}`, CodeUnknownFrameType, `unknown frame type "List"`, "List"},
		{"missing version", `{"type":"list"}`, CodeUnsupportedVersion, "unsupported protocol version: missing (expected 1)", "list"},
		{"string version", `{"v":"1","type":"list"}`, CodeUnsupportedVersion, `unsupported protocol version: "1" (expected 1)`, "list"},
		{"version 2", `{"v":2,"type":"list"}`, CodeUnsupportedVersion, "unsupported protocol version: 2 (expected 1)", "list"},
		{"version 1.5", `{"v":1.5,"type":"list"}`, CodeUnsupportedVersion, "unsupported protocol version: 1.5 (expected 1)", "list"},
		{"version before schema", `{"v":2,"type":"spawn"}`, CodeUnsupportedVersion, "unsupported protocol version: 2 (expected 1)", "spawn"},
		{"wrong type", `{"v":1,"type":"spawn","cwd":"/","bundle":3}`, CodeSchemaViolation, "invalid spawn frame at /bundle: must be string", "spawn"},
		{"id must be a string", `{"v":1,"type":"list","id":5}`, CodeSchemaViolation, "invalid list frame at /id: must be string", "list"},
		{"null id", `{"v":1,"type":"list","id":null}`, CodeSchemaViolation, "invalid list frame at /id: must be string", "list"},
		{"traceId must be a string", `{"v":1,"type":"list","traceId":[]}`, CodeSchemaViolation, "invalid list frame at /traceId: must be string", "list"},
		{"nested missing", `{"v":1,"type":"spawned","instance":{"instanceId":"i","state":"running"}}`, CodeSchemaViolation, "invalid spawned frame at /instance: must have required properties cwd", "spawned"},
		{"nested not an object", `{"v":1,"type":"spawned","instance":[]}`, CodeSchemaViolation, "invalid spawned frame at /instance: must be object", "spawned"},
		{"array element", `{"v":1,"type":"instances","instances":[{"instanceId":"i","cwd":"/","state":"running"},{"instanceId":"j","cwd":"/","state":"x","pid":"7"}]}`, CodeSchemaViolation, "invalid instances frame at /instances/1/pid: must be number", "instances"},
		{"array element not an object", `{"v":1,"type":"instances","instances":[1]}`, CodeSchemaViolation, "invalid instances frame at /instances/0: must be object", "instances"},
		{"null array", `{"v":1,"type":"instances","instances":null}`, CodeSchemaViolation, "invalid instances frame at /instances: must be array", "instances"},
		{"missing array", `{"v":1,"type":"instances"}`, CodeSchemaViolation, "invalid instances frame: must have required properties instances", "instances"},
		{"enum", `{"v":1,"type":"hello","machine":"m","role":"boss","packageVersion":"1","platform":"linux"}`, CodeSchemaViolation, "invalid hello frame at /role: must be equal to one of the allowed values", "hello"},
		{"string array element", `{"v":1,"type":"hello","machine":"m","role":"agent","packageVersion":"1","platform":"linux","capabilities":["a",2]}`, CodeSchemaViolation, "invalid hello frame at /capabilities/1: must be string", "hello"},
		{"null optional", `{"v":1,"type":"hello","machine":"m","role":"agent","packageVersion":"1","platform":"linux","capabilities":null}`, CodeSchemaViolation, "invalid hello frame at /capabilities: must be array", "hello"},
		{"env value", `{"v":1,"type":"spawn","cwd":"/","bundle":"b","env":{"A":"1","B":2}}`, CodeSchemaViolation, "invalid spawn frame at /env/B: must be string", "spawn"},
		{"event key missing", `{"v":1,"type":"event","instanceId":"i"}`, CodeSchemaViolation, "invalid event frame: must have required properties event", "event"},
		{"command key missing", `{"v":1,"type":"rpc","instanceId":"i"}`, CodeSchemaViolation, "invalid rpc frame: must have required properties command", "rpc"},
		{"required bool", `{"v":1,"type":"stopped","instanceId":"i"}`, CodeSchemaViolation, "invalid stopped frame: must have required properties forced", "stopped"},
		{"bool as number", `{"v":1,"type":"stopped","instanceId":"i","forced":0}`, CodeSchemaViolation, "invalid stopped frame at /forced: must be boolean", "stopped"},
		{"exitCode required even if null", `{"v":1,"type":"exec_exit","execId":"x","signal":null,"timedOut":false,"aborted":false,"durationMs":1}`, CodeSchemaViolation, "invalid exec_exit frame: must have required properties exitCode", "exec_exit"},
		{"nullable number", `{"v":1,"type":"exec_exit","execId":"x","exitCode":"1","signal":null,"timedOut":false,"aborted":false,"durationMs":1}`, CodeSchemaViolation, "invalid exec_exit frame at /exitCode: must be number,null", "exec_exit"},
		{"ui value kinds", `{"v":1,"type":"ui_response","instanceId":"i","requestId":"r","value":1}`, CodeSchemaViolation, "invalid ui_response frame at /value: must be string,boolean,null", "ui_response"},
		{"number out of range", `{"v":1,"type":"task_done_ack","taskId":"t","seq":1e400}`, CodeSchemaViolation, "invalid task_done_ack frame at /seq: must be a finite number", "task_done_ack"},
		{"pointer escaping", `{"v":1,"type":"spawn","cwd":"/","bundle":"b","env":{"a/b~c":1}}`, CodeSchemaViolation, "invalid spawn frame at /env/a~1b~0c: must be string", "spawn"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseFrame([]byte(c.rec))
			perr := wantCode(t, err, c.code)
			if perr.Message != c.msg {
				t.Errorf("message = %q, want %q", perr.Message, c.msg)
			}
			if perr.FrameType != c.frameType {
				t.Errorf("FrameType = %q, want %q", perr.FrameType, c.frameType)
			}
		})
	}
}

// TestAcceptedRecords covers what the schema must let through.
func TestAcceptedRecords(t *testing.T) {
	cases := []struct {
		name, rec string
		want      Frame
	}{
		{"unknown extra fields", `{"v":1,"type":"stop","instanceId":"i","extra":{"deep":[1,2]},"more":null}`,
			&StopFrame{InstanceID: "i"}},
		{"version written as 1.0", `{"v":1.0,"type":"list"}`, &ListFrame{}},
		{"version written as 1e0", `{"v":1e0,"type":"list"}`, &ListFrame{}},
		{"whitespace everywhere", " { \"v\" : 1 ,\t\"type\" : \"list\" } ", &ListFrame{}},
		{"second CR is whitespace", "{\"v\":1,\"type\":\"list\"}\r\r", &ListFrame{}},
		{"duplicate keys: last wins", `{"v":1,"type":"stop","instanceId":"a","instanceId":"b"}`, &StopFrame{InstanceID: "b"}},
		{"escaped keys and type", `{"v":1,"ty\u0070e":"s\u0074op","instance\u0049d":"i"}`, &StopFrame{InstanceID: "i"}},
		{"any JSON number", `{"v":1,"type":"task_done_ack","taskId":"t","seq":-1.25e2}`, &TaskDoneAckFrame{TaskID: "t", Seq: -125}},
		{"big integer stays exact", `{"v":1,"type":"task_done_ack","taskId":"t","seq":9007199254740993}`, &TaskDoneAckFrame{TaskID: "t", Seq: 9007199254740992}},
		{"empty id is no id", `{"v":1,"type":"list","id":""}`, &ListFrame{}},
		{"id and traceId", `{"v":1,"type":"list","id":"r-1","traceId":"t"}`, &ListFrame{Header: Header{ID: "r-1", TraceID: "t"}}},
		{"null event", `{"v":1,"type":"event","instanceId":"i","event":null}`, &EventFrame{InstanceID: "i", Event: json.RawMessage("null")}},
		{"raw kept verbatim", `{"v":1,"type":"event","instanceId":"i","event":{ "a" : [1, 2] }}`, &EventFrame{InstanceID: "i", Event: json.RawMessage(`{ "a" : [1, 2] }`)}},
		{"null optional nullable", `{"v":1,"type":"exec_instances","executions":[{"execId":"x","mode":"shell","cwd":"/","state":"running","startedAt":1,"exitCode":null}]}`,
			&ExecInstancesFrame{Executions: []ExecRecord{{ExecID: "x", Mode: ExecShell, Cwd: "/", State: ExecRunning, StartedAt: 1}}}},
		{"escapes decoded", `{"v":1,"type":"error","code":"c","message":"tab\there \"q\" \u00e9 \ud83d\ude00 \ud800 /\/"}`,
			&ErrorFrame{Code: "c", Message: "tab\there \"q\" é 😀 \uFFFD //"}},
		{"invalid UTF-8 becomes U+FFFD", "{\"v\":1,\"type\":\"error\",\"code\":\"c\",\"message\":\"a\xffb\"}", &ErrorFrame{Code: "c", Message: "a\uFFFDb"}},
		{"instance state is any string", `{"v":1,"type":"spawned","instance":{"instanceId":"i","cwd":"/","state":"zombie"}}`,
			&SpawnedFrame{Instance: InstanceInfo{InstanceID: "i", Cwd: "/", State: "zombie"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseFrame([]byte(c.rec))
			if err != nil {
				t.Fatalf("ParseFrame: %v", err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestNestingDepthIsNotAStackProblem(t *testing.T) {
	const depth = 400_000
	rec := `{"v":1,"type":"event","instanceId":"i","event":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
	f, err := ParseFrame([]byte(rec))
	if err != nil {
		t.Fatalf("ParseFrame: %v", err)
	}
	if n := len(f.(*EventFrame).Event); n != 2*depth {
		t.Errorf("event has %d bytes, want %d", n, 2*depth)
	}
	_, err = ParseFrame([]byte(rec[:len(rec)-2] + "}"))
	wantCode(t, err, CodeInvalidJSON)
}

func TestRecordSizeLimit(t *testing.T) {
	// A record whose bytes (without LF, with a trailing CR) are n long.
	record := func(n int, cr bool) string {
		head := `{"v":1,"type":"error","code":"c","message":"`
		tail := `"}`
		if cr {
			tail += "\r"
		}
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail + "\n"
	}
	cases := []struct {
		name string
		rec  string
		ok   bool
	}{
		{"exactly 1 MiB", record(MaxFrameBytes, false), true},
		{"exactly 1 MiB counting its CR", record(MaxFrameBytes, true), true},
		{"1 MiB + 1", record(MaxFrameBytes+1, false), false},
		{"1 MiB + CR", record(MaxFrameBytes+1, true), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			next := string(mustMarshal(t, &ListFrame{}))
			// Whole stream at once, and in small reads.
			for _, r := range []io.Reader{strings.NewReader(c.rec + next), iotest.HalfReader(strings.NewReader(c.rec + next))} {
				frames, errs := decodeAll(t, r)
				if c.ok {
					if len(errs) != 0 || len(frames) != 2 {
						t.Fatalf("frames %d, errors %v", len(frames), errs)
					}
					continue
				}
				if len(errs) != 1 || len(frames) != 1 {
					t.Fatalf("frames %d, errors %v; want 1 and exactly one frame_too_large", len(frames), errs)
				}
				wantCode(t, errs[0], CodeFrameTooLarge)
			}
		})
	}
	if _, err := ParseFrame([]byte(record(MaxFrameBytes+1, false))); !errors.Is(err, CodeFrameTooLarge) {
		t.Errorf("ParseFrame of an oversized record: %v", err)
	}
}

// endless is a hostile stream: n bytes of 'x' and never an LF.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), e.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	e.n -= k
	return k, nil
}

func TestHostileStreamMemoryIsBounded(t *testing.T) {
	d := NewDecoder(&endless{n: 16 * MaxFrameBytes})
	var tooLarge int
	for {
		_, err := d.Decode()
		if errors.Is(err, CodeFrameTooLarge) {
			tooLarge++
			continue
		}
		if err != io.EOF {
			t.Fatalf("final error %v, want io.EOF (the over-limit record is being discarded)", err)
		}
		break
	}
	if tooLarge != 1 {
		t.Errorf("%d frame_too_large errors, want exactly 1", tooLarge)
	}
	if c := cap(d.buf); c > MaxFrameBytes+1 {
		t.Errorf("decoder buffer grew to %d bytes, more than the limit + 1", c)
	}
}

func TestUnexpectedEOFInsideRecord(t *testing.T) {
	d := NewDecoder(strings.NewReader(`{"v":1,"type":"list"}` + "\n" + `{"v":1,"ty`))
	if _, err := d.Decode(); err != nil {
		t.Fatalf("first record: %v", err)
	}
	if _, err := d.Decode(); err != io.ErrUnexpectedEOF {
		t.Errorf("got %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestEmptyRecordsAreSkipped(t *testing.T) {
	list := string(mustMarshal(t, &ListFrame{}))
	frames, errs := decodeAll(t, strings.NewReader("\n\r\n\n"+list+"\n\n"))
	if len(frames) != 1 || len(errs) != 0 {
		t.Errorf("frames %d, errors %v; want one frame", len(frames), errs)
	}
}

func TestReadErrorIsFinal(t *testing.T) {
	boom := errors.New("boom")
	list := mustMarshal(t, &ListFrame{})
	d := NewDecoder(io.MultiReader(bytes.NewReader(list), iotest.ErrReader(boom)))
	if _, err := d.Decode(); err != nil {
		t.Fatalf("data before the error must decode: %v", err)
	}
	for range 2 {
		if _, err := d.Decode(); err != boom {
			t.Fatalf("got %v, want the reader's error, every time", err)
		}
	}
}

// TestEncodingMeetsTSExpectations pins the bytes for the pitfalls of
// reference section 6: what a TypeScript peer's schema insists on.
func TestEncodingMeetsTSExpectations(t *testing.T) {
	cases := []struct {
		name string
		f    Frame
		want string
	}{
		{"nil required array is []", &InstancesFrame{},
			`{"v":1,"type":"instances","instances":[]}`},
		{"empty arrays everywhere", &SessionsReportFrame{Machine: "m"},
			`{"v":1,"type":"sessions_report","machine":"m","full":false,"sessions":[]}`},
		{"hits", &SessionHitsFrame{}, `{"v":1,"type":"session_hits","hits":[]}`},
		{"executions", &ExecInstancesFrame{}, `{"v":1,"type":"exec_instances","executions":[]}`},
		{"required false present", &StoppedFrame{InstanceID: "i"},
			`{"v":1,"type":"stopped","instanceId":"i","forced":false}`},
		{"exit code and signal null, bools present", &ExecExitFrame{ExecID: "x"},
			`{"v":1,"type":"exec_exit","execId":"x","exitCode":null,"signal":null,"timedOut":false,"aborted":false,"durationMs":0}`},
		{"done false present", &FsResultFrame{}, `{"v":1,"type":"fs_result","done":false}`},
		{"pinned false present", &SessionsReportFrame{Machine: "m", Sessions: []SessionInfo{{SessionID: "s", Path: "p", Cwd: "c", Kind: SessionTask}}},
			`{"v":1,"type":"sessions_report","machine":"m","full":false,"sessions":[{"sessionId":"s","path":"p","cwd":"c","kind":"task","pinned":false,"updatedAt":0}]}`},
		{"nil event is null, key present", &EventFrame{InstanceID: "i"},
			`{"v":1,"type":"event","instanceId":"i","event":null}`},
		{"nil command is null, key present", &RPCFrame{InstanceID: "i"},
			`{"v":1,"type":"rpc","instanceId":"i","command":null}`},
		{"optional fields absent, never null", &HelloFrame{Machine: "m", Role: RoleAgent, PackageVersion: "0.0.1", Platform: "linux"},
			`{"v":1,"type":"hello","machine":"m","role":"agent","packageVersion":"0.0.1","platform":"linux"}`},
		{"pid absent when unknown", &SpawnedFrame{Instance: InstanceInfo{InstanceID: "i", Cwd: "/", State: InstanceRunning}},
			`{"v":1,"type":"spawned","instance":{"instanceId":"i","cwd":"/","state":"running"}}`},
		{"integral seq has no exponent", &TaskDoneAckFrame{TaskID: "t", Seq: 1730000000123},
			`{"v":1,"type":"task_done_ack","taskId":"t","seq":1730000000123}`},
		{"numbers print like JavaScript", &ExecStartedFrame{ExecID: "x", StartedAt: 1e21},
			`{"v":1,"type":"exec_started","execId":"x","startedAt":1e+21}`},
		{"small numbers too", &ExecStartedFrame{ExecID: "x", StartedAt: 1e-7},
			`{"v":1,"type":"exec_started","execId":"x","startedAt":1e-7}`},
		{"U+2028 written raw like JSON.stringify; controls escaped", &ErrorFrame{Code: "c", Message: "a\u2028b\x01<&>\n"},
			`{"v":1,"type":"error","code":"c","message":"a` + "\u2028" + `b\u0001<&>\n"}`},
		// Invalid UTF-8 becomes U+FFFD written raw, as JSON.stringify writes
		// that character (a JS string cannot hold invalid UTF-8 at all).
		{"short escapes and invalid UTF-8", &ErrorFrame{Code: "c", Message: "\b\f\t\r\"\\ a\xffb é"},
			`{"v":1,"type":"error","code":"c","message":"\b\f\t\r\"\\ a` + "\uFFFD" + `b é"}`},
		{"multi-line raw compacted to one line", &EventFrame{InstanceID: "i", Event: json.RawMessage("{\n  \"a\": \"x y\",\r\n  \"b\": [1, 2]\n}")},
			`{"v":1,"type":"event","instanceId":"i","event":{"a":"x y","b":[1,2]}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustMarshal(t, c.f)
			if string(got) != c.want+"\n" {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	cases := []struct {
		name string
		f    Frame
		path string
	}{
		{"raw not JSON", &EventFrame{InstanceID: "i", Event: json.RawMessage(`{"a":`)}, "/event"},
		{"two raw values", &EventFrame{InstanceID: "i", Event: json.RawMessage(`1 2`)}, "/event"},
		{"NaN", &TaskDoneAckFrame{TaskID: "t", Seq: math.NaN()}, "/seq"},
		{"infinity", &ExecStartedFrame{ExecID: "x", StartedAt: math.Inf(1)}, "/startedAt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := AppendFrame([]byte("keep"), c.f)
			var ee *EncodeError
			if !errors.As(err, &ee) {
				t.Fatalf("got %v, want *EncodeError", err)
			}
			if ee.Path != c.path || ee.FrameType != c.f.FrameType() {
				t.Errorf("error at %s %s, want %s %s", ee.FrameType, ee.Path, c.f.FrameType(), c.path)
			}
			if string(out) != "keep" {
				t.Errorf("dst changed on error")
			}
		})
	}
}

func TestEncoderWritesOneFramePerWrite(t *testing.T) {
	var buf bytes.Buffer
	e := NewEncoder(&buf)
	for _, f := range sampleFrames() {
		if err := e.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Encode(&EventFrame{Event: json.RawMessage("{")}); err == nil {
		t.Fatal("invalid frame encoded")
	}
	frames, errs := decodeAll(t, &buf)
	if len(errs) != 0 || len(frames) != len(sampleFrames()) {
		t.Fatalf("frames %d, errors %v", len(frames), errs)
	}
	if d := cmp.Diff(sampleFrames(), frames, rawEqual); d != "" {
		t.Errorf("(-sent +decoded):\n%s", d)
	}
}

func TestNewFrame(t *testing.T) {
	for _, name := range frameTypes() {
		f, ok := newFrame(name)
		if !ok || f.FrameType() != name {
			t.Errorf("NewFrame(%q) = %v, %v", name, f, ok)
		}
	}
	if _, ok := newFrame("toString"); ok {
		t.Error("NewFrame(toString) succeeded")
	}
}
