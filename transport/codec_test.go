package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
)

// rawEqual compares raw JSON by its compact form: the codec keeps raw
// values verbatim on decode but compacts multi-line ones on encode.
var rawEqual = cmp.Comparer(func(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
})

func mustMarshal(t testing.TB, f Frame) []byte {
	t.Helper()
	b, err := MarshalFrame(f)
	if err != nil {
		t.Fatalf("MarshalFrame(%T): %v", f, err)
	}
	return b
}

// decodeAll reads every result of a stream: frames and per-record errors.
func decodeAll(t testing.TB, r io.Reader) (frames []Frame, errs []error) {
	t.Helper()
	d := NewDecoder(r)
	for {
		f, err := d.Decode()
		var perr *ProtocolError
		switch {
		case err == nil:
			frames = append(frames, f)
		case errors.As(err, &perr):
			errs = append(errs, err)
		case errors.Is(err, io.EOF):
			return frames, errs
		default:
			t.Fatalf("final decode error: %v", err)
		}
	}
}

func wantCode(t testing.TB, err error, code ErrorCode) *ProtocolError {
	t.Helper()
	var perr *ProtocolError
	if !errors.As(err, &perr) {
		t.Fatalf("got %v, want a *ProtocolError %s", err, code)
	}
	if !errors.Is(err, code) {
		t.Fatalf("got code %s (%q), want %s", perr.Code, perr.Message, code)
	}
	return perr
}

// Checklist 2.1 item 1: every frame type encodes and decodes back to a
// deep-equal value, optional fields included.
func TestChecklist01EveryFrameRoundTrips(t *testing.T) {
	for _, f := range sampleFrames() {
		wire := mustMarshal(t, f)
		if bytes.Count(wire, []byte("\n")) != 1 || wire[len(wire)-1] != '\n' {
			t.Fatalf("%s: not one line: %q", f.FrameType(), wire)
		}
		got, err := ParseFrame(wire[:len(wire)-1])
		if err != nil {
			t.Fatalf("%s: decode of %s: %v", f.FrameType(), wire, err)
		}
		if d := cmp.Diff(f, got, rawEqual); d != "" {
			t.Errorf("%s round trip (-sent +decoded):\n%s\nwire: %s", f.FrameType(), d, wire)
		}
	}
}

// Checklist 2.1 item 2: the sample set covers all 36 types.
func TestChecklist02SamplesCoverEveryType(t *testing.T) {
	want := []string{"hello", "heartbeat", "error", "spawn", "spawned", "spawn_error", "stop", "stopped",
		"list", "instances", "rpc", "event", "task_done", "task_done_ack", "task_accept", "task_reject",
		"deliver", "delivered", "ui_request", "ui_response", "sessions_report", "session_search",
		"session_hits", "exec_start", "exec_started", "exec_output", "exec_exit", "exec_abort",
		"exec_aborted", "exec_list", "exec_instances", "fs_read", "fs_list", "fs_grep", "fs_diff", "fs_result"}
	slices.Sort(want)
	if len(want) != 36 {
		t.Fatalf("expectation lists %d types", len(want))
	}
	registered := frameTypes()
	for _, ty := range want {
		if !slices.Contains(registered, ty) {
			t.Errorf("registry lacks the reference type %s", ty)
		}
	}
	// Every registered type, the 36 and any added later, has a sample.
	seen := map[string]bool{}
	for _, f := range sampleFrames() {
		seen[f.FrameType()] = true
	}
	for _, ty := range registered {
		if !seen[ty] {
			t.Errorf("sample set lacks %s", ty)
		}
	}
}

// Checklist 2.1 item 3: U+2028 and U+2029 are not line breaks.
func TestChecklist03LineSeparatorsSurvive(t *testing.T) {
	msg := "a\u2028b\u2029c"
	wire := mustMarshal(t, &ErrorFrame{Code: "x", Message: msg})
	frames, errs := decodeAll(t, bytes.NewReader(wire))
	if len(errs) != 0 || len(frames) != 1 {
		t.Fatalf("got %d frames, errors %v", len(frames), errs)
	}
	if got := frames[0].(*ErrorFrame).Message; got != msg {
		t.Errorf("message = %q, want %q", got, msg)
	}
}

// decodeInBubble starts a decoder on the read end of a pipe inside a
// synctest bubble and returns a function that feeds bytes and reports what
// the decoder produced once it is blocked again.
func decodeInBubble(t *testing.T) (feed func([]byte) []any, closeFeed func() []any) {
	pr, pw := io.Pipe()
	results := make(chan any, 16)
	go func() {
		d := NewDecoder(pr)
		for {
			f, err := d.Decode()
			if err != nil {
				results <- err
				if errors.Is(err, io.EOF) {
					return
				}
				continue
			}
			results <- f
		}
	}()
	drain := func() []any {
		synctest.Wait()
		var out []any
		for {
			select {
			case r := <-results:
				out = append(out, r)
			default:
				return out
			}
		}
	}
	feed = func(b []byte) []any {
		done := make(chan struct{})
		go func() { pw.Write(b); close(done) }()
		synctest.Wait()
		out := drain()
		<-done
		return out
	}
	closeFeed = func() []any {
		pw.Close()
		return drain()
	}
	return feed, closeFeed
}

// Checklist 2.1 item 4: a frame split across two feeds yields nothing,
// then exactly one frame.
func TestChecklist04FrameSplitAcrossReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wire := mustMarshal(t, &StopFrame{InstanceID: "i-1"})
		feed, closeFeed := decodeInBubble(t)
		if got := feed(wire[:5]); len(got) != 0 {
			t.Fatalf("after 5 bytes: %v, want nothing", got)
		}
		got := feed(wire[5:])
		if len(got) != 1 {
			t.Fatalf("after the rest: %v, want one frame", got)
		}
		if f, ok := got[0].(*StopFrame); !ok || f.InstanceID != "i-1" {
			t.Fatalf("got %#v", got[0])
		}
		if got := closeFeed(); len(got) != 1 || got[0] != io.EOF {
			t.Fatalf("at close: %v, want io.EOF only", got)
		}
	})
}

// Checklist 2.1 item 5: two records in one chunk, the first ending in CR LF.
func TestChecklist05TwoRecordsOneChunkCRLF(t *testing.T) {
	a := mustMarshal(t, &StopFrame{InstanceID: "a"})
	b := mustMarshal(t, &StopFrame{InstanceID: "b"})
	chunk := append(append(a[:len(a)-1:len(a)-1], '\r', '\n'), b...)
	frames, errs := decodeAll(t, bytes.NewReader(chunk))
	if len(errs) != 0 || len(frames) != 2 {
		t.Fatalf("frames %v, errors %v", frames, errs)
	}
	if frames[0].(*StopFrame).InstanceID != "a" || frames[1].(*StopFrame).InstanceID != "b" {
		t.Errorf("out of order: %v", frames)
	}
}

// Checklist 2.1 item 6: multi-byte UTF-8 fed one byte at a time.
func TestChecklist06MultibyteOneByteAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		msg := "café, Köln ✓"
		wire := mustMarshal(t, &ErrorFrame{Code: "x", Message: msg})
		feed, closeFeed := decodeInBubble(t)
		var got []any
		for i := range wire {
			got = append(got, feed(wire[i:i+1])...)
		}
		if end := closeFeed(); len(end) != 1 || end[0] != io.EOF {
			t.Fatalf("at close: %v, want io.EOF", end)
		}
		if len(got) != 1 {
			t.Fatalf("got %v, want exactly one frame", got)
		}
		if f := got[0].(*ErrorFrame); f.Message != msg {
			t.Errorf("message = %q, want %q", f.Message, msg)
		}
	})
}

// Checklist 2.1 item 7: a non-JSON line is invalid_json and the next line
// still decodes.
func TestChecklist07InvalidJSONThenValid(t *testing.T) {
	stream := "not json at all\n" + string(mustMarshal(t, &ListFrame{}))
	frames, errs := decodeAll(t, strings.NewReader(stream))
	if len(errs) != 1 || len(frames) != 1 {
		t.Fatalf("frames %v, errors %v", frames, errs)
	}
	wantCode(t, errs[0], CodeInvalidJSON)
	if _, ok := frames[0].(*ListFrame); !ok {
		t.Errorf("got %T, want *ListFrame", frames[0])
	}
}

// Checklist 2.1 item 8: an unknown type is unknown_frame_type.
func TestChecklist08UnknownType(t *testing.T) {
	_, err := ParseFrame([]byte(`{"v":1,"type":"teleport"}`))
	perr := wantCode(t, err, CodeUnknownFrameType)
	if perr.FrameType != "teleport" {
		t.Errorf("FrameType = %q, want teleport", perr.FrameType)
	}
}

// Checklist 2.1 item 9: v:2 is unsupported_version.
func TestChecklist09Version2(t *testing.T) {
	_, err := ParseFrame([]byte(`{"v":2,"type":"heartbeat"}`))
	perr := wantCode(t, err, CodeUnsupportedVersion)
	if want := "unsupported protocol version: 2 (expected 1)"; perr.Message != want {
		t.Errorf("message = %q, want %q", perr.Message, want)
	}
}

// Checklist 2.1 item 10: spawn without bundle is schema_violation naming spawn.
func TestChecklist10SpawnMissingBundle(t *testing.T) {
	_, err := ParseFrame([]byte(`{"v":1,"type":"spawn","cwd":"/w"}`))
	perr := wantCode(t, err, CodeSchemaViolation)
	if want := "invalid spawn frame: must have required properties bundle"; perr.Message != want {
		t.Errorf("message = %q, want %q", perr.Message, want)
	}
	if perr.FrameType != "spawn" {
		t.Errorf("FrameType = %q", perr.FrameType)
	}
}

// Checklist 2.1 item 11: arrays, null and bare strings are not frames.
func TestChecklist11NonObjectsRejected(t *testing.T) {
	for _, rec := range []string{`[]`, `[{"v":1,"type":"list"}]`, `null`, `"hello"`, `42`, `true`} {
		_, err := ParseFrame([]byte(rec))
		wantCode(t, err, CodeNotAnObject)
	}
}

// Checklist 2.1 item 12: encoding a frame with a 1 MiB message fails.
func TestChecklist12EncodeTooLarge(t *testing.T) {
	dst := []byte("prefix")
	out, err := AppendFrame(dst, &ErrorFrame{Code: "x", Message: strings.Repeat("a", MaxFrameBytes)})
	wantCode(t, err, CodeFrameTooLarge)
	if string(out) != "prefix" {
		t.Errorf("dst changed on error: %d bytes", len(out))
	}
	if !strings.Contains(err.Error(), "frame too large") {
		t.Errorf("message %q does not say frame too large", err)
	}
}

// Checklist 2.1 item 13: an over-1-MiB record fed in 256 KiB chunks without
// a newline gives exactly one frame_too_large; after its newline the next
// frame decodes.
func TestChecklist13OversizeRecordInChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		feed, closeFeed := decodeInBubble(t)
		var got []any
		chunk := bytes.Repeat([]byte("x"), 256<<10)
		for range 5 { // 1.25 MiB
			got = append(got, feed(chunk)...)
		}
		got = append(got, feed([]byte("tail\n"))...)
		got = append(got, feed(mustMarshal(t, &ListFrame{}))...)
		got = append(got, closeFeed()...)
		if len(got) != 3 {
			t.Fatalf("got %d results %v, want error, frame, EOF", len(got), got)
		}
		wantCode(t, got[0].(error), CodeFrameTooLarge)
		if _, ok := got[1].(*ListFrame); !ok {
			t.Errorf("second result %v, want *ListFrame", got[1])
		}
		if got[2] != io.EOF {
			t.Errorf("third result %v, want io.EOF", got[2])
		}
	})
}
