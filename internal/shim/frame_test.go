package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// encodeFrame is one frame as the frameWriter sends it.
func encodeFrame(t testing.TB, typ frameType, prefix, data []byte) []byte {
	var buf bytes.Buffer
	if err := newFrameWriter(&buf).write(typ, prefix, data, true); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeJSONFrame(t testing.TB, typ frameType, prefix []byte, v any) []byte {
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return encodeFrame(t, typ, prefix, body)
}

func decodeOne(t *testing.T, raw []byte) (frameType, []byte) {
	t.Helper()
	typ, body, err := readFrame(bytes.NewReader(raw), maxControlFrame)
	if err != nil {
		t.Fatalf("readFrame: %v", err)
	}
	return typ, body
}

var allow = cmp.AllowUnexported(agentFrame{}, shimFrame{})

func TestAgentFramesRoundTrip(t *testing.T) {
	cases := []struct {
		raw  []byte
		want agentFrame
	}{
		{encodeJSONFrame(t, frameHello, nil, helloMsg{V: 1, InstanceID: "i-1", Token: "tok", ResumeFrom: 7}),
			agentFrame{typ: frameHello, hello: helloMsg{V: 1, InstanceID: "i-1", Token: "tok", ResumeFrom: 7}}},
		{encodeFrame(t, frameWrite, append(u32(9), 0), []byte("{\"type\":\"abort\"}\n")),
			agentFrame{typ: frameWrite, req: 9, data: []byte("{\"type\":\"abort\"}\n")}},
		{encodeFrame(t, frameWrite, append(u32(0), writeMore), []byte("part")),
			agentFrame{typ: frameWrite, data: []byte("part"), more: true}},
		{encodeFrame(t, frameCloseStdin, u32(3), nil), agentFrame{typ: frameCloseStdin, req: 3}},
		{encodeJSONFrame(t, frameSignal, u32(4), signalMsg{SignalKill}), agentFrame{typ: frameSignal, req: 4, signal: SignalKill}},
		{encodeJSONFrame(t, frameStop, u32(5), stopMsg{CloseStdin: true, GraceMs: 5000}),
			agentFrame{typ: frameStop, req: 5, stop: stopMsg{CloseStdin: true, GraceMs: 5000}}},
		{encodeFrame(t, frameStatus, u32(6), nil), agentFrame{typ: frameStatus, req: 6}},
		{encodeFrame(t, frameAck, u64(1<<40), nil), agentFrame{typ: frameAck, ack: 1 << 40}},
	}
	for _, tc := range cases {
		typ, body := decodeOne(t, tc.raw)
		got, err := decodeAgentFrame(typ, body)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, allow); diff != "" {
			t.Errorf("%s (-want +got):\n%s", typ, diff)
		}
	}
}

func TestShimFramesRoundTrip(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	exit := ExitStatus{Code: -1, Signal: SignalKill, ExitedAt: at, StderrTail: "oops"}
	st := Status{InstanceID: "i-1", WorkerPID: 42, Running: true, NextSeq: 3, StartedAt: at}
	cases := []struct {
		raw  []byte
		want shimFrame
	}{
		{encodeJSONFrame(t, frameWelcome, nil, welcomeMsg{V: 1, MaxLine: 100, Window: 10, Status: st}),
			shimFrame{typ: frameWelcome, welcome: &welcomeMsg{V: 1, MaxLine: 100, Window: 10, Status: st}}},
		{encodeJSONFrame(t, frameRefused, nil, RemoteError{CodeBadToken, "no"}),
			shimFrame{typ: frameRefused, refused: &RemoteError{CodeBadToken, "no"}}},
		{encodeFrame(t, frameLine, u64(12), []byte("{}")), shimFrame{typ: frameLine, seq: 12, data: []byte("{}")}},
		{encodeFrame(t, frameLine, u64(13), nil), shimFrame{typ: frameLine, seq: 13, data: []byte{}}},
		{encodeFrame(t, frameOverlong, append(u64(14), u64(99)...), nil), shimFrame{typ: frameOverlong, seq: 14, overlong: 99}},
		{encodeFrame(t, frameGap, append(u64(1), u64(5)...), nil), shimFrame{typ: frameGap, gap: GapError{1, 5}}},
		{encodeJSONFrame(t, frameExit, u64(15), exit), shimFrame{typ: frameExit, seq: 15, exit: &exit}},
		{encodeJSONFrame(t, frameResponse, u32(8), responseMsg{Error: &RemoteError{CodeExited, "gone"}}),
			shimFrame{typ: frameResponse, req: 8, response: &responseMsg{Error: &RemoteError{CodeExited, "gone"}}}},
		{encodeJSONFrame(t, frameResponse, u32(9), responseMsg{Status: &st}),
			shimFrame{typ: frameResponse, req: 9, response: &responseMsg{Status: &st}}},
		{encodeFrame(t, frameReplaced, nil, nil), shimFrame{typ: frameReplaced}},
	}
	for _, tc := range cases {
		typ, body := decodeOne(t, tc.raw)
		got, err := decodeShimFrame(typ, body)
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, allow); diff != "" {
			t.Errorf("%s (-want +got):\n%s", typ, diff)
		}
	}
}

func TestBadFrames(t *testing.T) {
	cases := map[string]struct {
		raw   []byte
		agent bool
	}{
		"ack too short":        {encodeFrame(t, frameAck, []byte{1, 2}, nil), true},
		"write without flags":  {encodeFrame(t, frameWrite, u32(1), nil), true},
		"write unknown flag":   {encodeFrame(t, frameWrite, append(u32(1), 2), nil), true},
		"request without id":   {encodeFrame(t, frameStatus, []byte{1}, nil), true},
		"status with body":     {encodeFrame(t, frameStatus, u32(1), []byte("x")), true},
		"unknown signal":       {encodeJSONFrame(t, frameSignal, u32(1), signalMsg{"STOP"}), true},
		"negative grace":       {encodeJSONFrame(t, frameStop, u32(1), stopMsg{GraceMs: -1}), true},
		"hello not json":       {encodeFrame(t, frameHello, nil, []byte("{")), true},
		"shim type from agent": {encodeFrame(t, frameLine, u64(1), nil), true},
		"line seq 0":           {encodeFrame(t, frameLine, u64(0), nil), false},
		"inverted gap":         {encodeFrame(t, frameGap, append(u64(5), u64(5)...), nil), false},
		"overlong zero":        {encodeFrame(t, frameOverlong, append(u64(1), u64(0)...), nil), false},
		"refused no code":      {encodeJSONFrame(t, frameRefused, nil, RemoteError{}), false},
		"welcome no maxLine":   {encodeJSONFrame(t, frameWelcome, nil, welcomeMsg{V: 1}), false},
		"agent type from shim": {encodeFrame(t, frameAck, u64(1), nil), false},
	}
	for name, tc := range cases {
		typ, body := decodeOne(t, tc.raw)
		var err error
		if tc.agent {
			_, err = decodeAgentFrame(typ, body)
		} else {
			_, err = decodeShimFrame(typ, body)
		}
		var fe *FrameError
		if !errors.As(err, &fe) || !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want a *FrameError", name, err)
		}
	}
}

func TestReadFrameLimitsAndTruncation(t *testing.T) {
	big := encodeFrame(t, frameWrite, append(u32(1), 0), make([]byte, 100))
	if _, _, err := readFrame(bytes.NewReader(big), 50); !errors.Is(err, ErrProtocol) {
		t.Errorf("over the limit: %v, want ErrProtocol", err)
	}
	if _, _, err := readFrame(bytes.NewReader(big[:3]), 1000); !errors.Is(err, ErrProtocol) {
		t.Errorf("truncated header: %v, want ErrProtocol", err)
	}
	if _, _, err := readFrame(bytes.NewReader(big[:20]), 1000); !errors.Is(err, ErrProtocol) {
		t.Errorf("truncated body: %v, want ErrProtocol", err)
	}
	if _, _, err := readFrame(bytes.NewReader(nil), 1000); err != io.EOF {
		t.Errorf("empty stream: %v, want io.EOF", err)
	}
}

// FuzzFrames feeds arbitrary bytes to the frame reader and both decoders:
// nothing may panic or allocate beyond the limit, every failure is a
// *FrameError or io.EOF, and a decoded frame re-encodes to the same bytes.
func FuzzFrames(f *testing.F) {
	f.Add(encodeJSONFrame(f, frameHello, nil, helloMsg{V: 1, InstanceID: "i", Token: "t"}))
	f.Add(encodeFrame(f, frameWrite, append(u32(1), writeMore), []byte("x\n")))
	f.Add(encodeFrame(f, frameLine, u64(1), []byte("{}")))
	f.Add(encodeFrame(f, frameGap, append(u64(1), u64(3)...), nil))
	f.Add(encodeJSONFrame(f, frameExit, u64(2), ExitStatus{Code: 1}))
	f.Add(encodeJSONFrame(f, frameResponse, u32(1), responseMsg{Status: &Status{}}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x83})
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 16
		br := bufio.NewReader(bytes.NewReader(data))
		// The agent's reader reads the same frames as readFrame, in
		// whatever pieces the connection gives them; its bodies stay
		// intact while it reads on.
		fr := newFrameReader(&chunkReader{data: data, n: 1 + len(data)%97})
		type kept struct{ body, copied []byte }
		var bodies []kept
		defer func() {
			for i, k := range bodies {
				if !bytes.Equal(k.body, k.copied) {
					t.Fatalf("frame %d changed after it was read", i)
				}
			}
		}()
		for {
			typ, body, err := readFrame(br, limit)
			ftyp, fbody, ferr := fr.next(limit)
			if (err == nil) != (ferr == nil) || err != nil && err.Error() != ferr.Error() {
				t.Fatalf("readFrame: %v; frameReader: %v", err, ferr)
			}
			if err == nil {
				if ftyp != typ || !bytes.Equal(fbody, body) {
					t.Fatalf("frameReader read %s %x, readFrame %s %x", ftyp, fbody, typ, body)
				}
				_ = append(fbody, 0xee) // a body's capacity ends with it
				bodies = append(bodies, kept{fbody, bytes.Clone(fbody)})
			}
			if err != nil {
				var fe *FrameError
				if err != io.EOF && !errors.As(err, &fe) {
					t.Fatalf("readFrame error %T %v", err, err)
				}
				return
			}
			if len(body) > limit {
				t.Fatalf("body of %d bytes over the limit", len(body))
			}
			a, aerr := decodeAgentFrame(typ, body)
			s, serr := decodeShimFrame(typ, body)
			for _, err := range []error{aerr, serr} {
				if err != nil && !errors.Is(err, ErrProtocol) {
					t.Fatalf("decode error %T %v", err, err)
				}
			}
			if aerr == nil && serr == nil {
				t.Fatalf("%s decoded as both an agent and a shim frame", typ)
			}
			// Binary bodies re-encode exactly.
			var again []byte
			switch {
			case aerr == nil && typ == frameWrite:
				flags := byte(0)
				if a.more {
					flags = writeMore
				}
				again = encodeFrame(t, typ, append(u32(a.req), flags), a.data)
			case aerr == nil && typ == frameAck:
				again = encodeFrame(t, typ, u64(a.ack), nil)
			case serr == nil && typ == frameLine:
				again = encodeFrame(t, typ, u64(s.seq), s.data)
			case serr == nil && typ == frameGap:
				again = encodeFrame(t, typ, append(u64(s.gap.From), u64(s.gap.To)...), nil)
			default:
				continue
			}
			if want := encodeFrame(t, typ, nil, body); !bytes.Equal(again, want) {
				t.Fatalf("%s re-encoded as %x, want %x", typ, again, want)
			}
		}
	})
}

// The precomputed answer to a successful request is what encoding it
// would give.
func TestEmptyResponseIsEncoded(t *testing.T) {
	want, err := json.Marshal(responseMsg{})
	if err != nil {
		t.Fatal(err)
	}
	if string(emptyResponse) != string(want) {
		t.Errorf("emptyResponse = %s, want %s", emptyResponse, want)
	}
}
