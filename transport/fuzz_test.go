package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/jsonscan/jsontest"
)

var protocolCodes = []ErrorCode{CodeInvalidJSON, CodeNotAnObject, CodeUnknownFrameType,
	CodeUnsupportedVersion, CodeSchemaViolation, CodeFrameTooLarge}

func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, fr := range sampleFrames() {
		b, err := MarshalFrame(fr)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	for _, s := range []string{
		"", "\n", "\r\n", " \n", "{}\n", "[]\n", "null\n", `"x"` + "\n",
		`{"v":2,"type":"teleport"}` + "\n",
		`{"v":1,"type":"toString"}` + "\n",
		`{"v":1,"ty\u0070e":"list","id":""}` + "\r\n",
		`{"v":1,"type":"event","instanceId":"i","event":[[[{"a":[1,-2.5e-3,true,null,"\ud800"]}]]]}` + "\n",
		`{"v":1,"type":"spawn","cwd":"/","bundle":"b","env":{"a":"1","a":"2"}}` + "\n",
		"{\"v\":1,\"type\":\"error\",\"code\":\"c\",\"message\":\"\xff\u2028\"}\n",
		`{"v":1,"type":"exec_exit","execId":"x","exitCode":null,"signal":null,"timedOut":false,"aborted":false,"durationMs":-0}` + "\n",
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// checkReencodes asserts that a decoded frame encodes and decodes back to
// an equal value.
func checkReencodes(t *testing.T, f Frame) {
	t.Helper()
	wire, err := MarshalFrame(f)
	if errors.Is(err, CodeFrameTooLarge) {
		return // escaping can grow a record that was just under the limit
	}
	if err != nil {
		t.Fatalf("decoded %s frame does not encode: %v", f.FrameType(), err)
	}
	again, err := ParseFrame(wire[:len(wire)-1])
	if err != nil {
		t.Fatalf("re-encoded %s frame does not decode: %v\n%s", f.FrameType(), err, wire)
	}
	if d := cmp.Diff(f, again, rawEqual); d != "" {
		t.Fatalf("%s frame changed through encode/decode (-first +second):\n%s", f.FrameType(), d)
	}
}

// FuzzParseFrame: any record either decodes to a frame that survives
// re-encoding, or fails with one of the six protocol codes; never a panic.
func FuzzParseFrame(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(bytes.TrimSuffix(s, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, record []byte) {
		fr, err := ParseFrame(record)
		// The scanner agrees with encoding/json on what is JSON (which
		// gives up beyond 10,000 levels of nesting; ours does not).
		if len(record) <= MaxFrameBytes && bytes.Count(record, []byte("["))+bytes.Count(record, []byte("{")) < 10000 {
			trimmed := bytes.TrimSuffix(record, []byte("\r"))
			if valid := json.Valid(trimmed); valid == errors.Is(err, CodeInvalidJSON) {
				t.Fatalf("json.Valid = %v but ParseFrame error = %v for %q", valid, err, record)
			}
		}
		if err != nil {
			var perr *ProtocolError
			if !errors.As(err, &perr) || !slices.Contains(protocolCodes, perr.Code) {
				t.Fatalf("error %v is not a protocol error", err)
			}
			if fr != nil {
				t.Fatal("a frame returned with an error")
			}
			return
		}
		checkReencodes(t, fr)
	})
}

type result struct {
	frame Frame
	code  ErrorCode
}

func decodeResults(t *testing.T, r io.Reader) ([]result, *Decoder) {
	d := NewDecoder(r)
	var out []result
	for {
		f, err := d.Decode()
		var perr *ProtocolError
		switch {
		case err == nil:
			out = append(out, result{frame: f})
		case errors.As(err, &perr):
			out = append(out, result{code: perr.Code})
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return out, d
		default:
			t.Fatalf("unexpected final error %v", err)
		}
	}
}

// FuzzJSON: ParseFrame calls a record invalid_json exactly when
// encoding/json says it is not JSON, on the corpus shared by the scanner's
// front ends (see jsontest), and what it decodes survives re-encoding.
func FuzzJSON(f *testing.F) {
	jsontest.Seed(f)
	f.Fuzz(func(t *testing.T, record []byte) {
		record = bytes.TrimSuffix(record, []byte("\r"))
		if len(record) > MaxFrameBytes || bytes.Count(record, []byte("["))+bytes.Count(record, []byte("{")) >= 10000 {
			return
		}
		fr, err := ParseFrame(record)
		if valid := json.Valid(record); valid == errors.Is(err, CodeInvalidJSON) {
			t.Fatalf("json.Valid = %v but ParseFrame error = %v for %q", valid, err, record)
		}
		if err == nil {
			checkReencodes(t, fr)
		}
	})
}

// FuzzDecoder: a stream decodes the same whether it arrives at once, one
// byte at a time or in odd chunks; memory stays bounded; every frame
// survives re-encoding.
func FuzzDecoder(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint8(3))
	}
	f.Add(bytes.Join(fuzzSeeds(f), nil), uint8(7))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		whole, d := decodeResults(t, bytes.NewReader(stream))
		if c := cap(d.buf); c > MaxFrameBytes+1 {
			t.Fatalf("decoder buffer grew to %d", c)
		}
		bytewise, _ := decodeResults(t, iotest.OneByteReader(bytes.NewReader(stream)))
		chunked, _ := decodeResults(t, &chunkReader{data: stream, size: int(chunk%64) + 1})
		opts := []cmp.Option{rawEqual, cmp.AllowUnexported(result{})}
		if d := cmp.Diff(whole, bytewise, opts...); d != "" {
			t.Fatalf("one byte at a time differs (-whole +bytewise):\n%s", d)
		}
		if d := cmp.Diff(whole, chunked, opts...); d != "" {
			t.Fatalf("chunked differs (-whole +chunked):\n%s", d)
		}
		for _, r := range whole {
			if r.frame != nil {
				checkReencodes(t, r.frame)
			}
		}
	})
}

// chunkReader returns at most size bytes per read.
type chunkReader struct {
	data []byte
	size int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.size)], r.data)
	r.data = r.data[n:]
	return n, nil
}
