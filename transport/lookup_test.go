package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFieldLookup covers the paths of Schema.lookup: fields in wire order
// (found at the cursor), in any other order, absent, duplicated (the last
// one wins, also when the duplicates are escaped or share a key summary
// with another key), in the frame and in nested objects.
func TestFieldLookup(t *testing.T) {
	model := func(provider, id string) *ModelRef { return &ModelRef{Provider: provider, ID: id} }
	cases := []struct {
		name, rec string
		want      Frame
	}{
		{"wire order", `{"v":1,"type":"stop","id":"r","instanceId":"i"}`,
			&StopFrame{Header: Header{ID: "r"}, InstanceID: "i"}},
		{"reverse order", `{"instanceId":"i","id":"r","type":"stop","v":1}`,
			&StopFrame{Header: Header{ID: "r"}, InstanceID: "i"}},
		{"duplicate after other fields", `{"instanceId":"a","v":1,"type":"stop","instanceId":"b"}`,
			&StopFrame{InstanceID: "b"}},
		{"duplicate, first one escaped", `{"v":1,"type":"stop","instance\u0049d":"a","instanceId":"b"}`,
			&StopFrame{InstanceID: "b"}},
		{"duplicate, last one escaped", `{"v":1,"type":"stop","instanceId":"a","instance\u0049d":"b"}`,
			&StopFrame{InstanceID: "b"}},
		{"key with the same summary", `{"v":1,"type":"stop","instanceId":"a","instanceXd":"x"}`,
			&StopFrame{InstanceID: "a"}},
		{"same summary, after the field", `{"v":1,"type":"stop","instanceXd":"x","instanceId":"a","instanceYd":"y"}`,
			&StopFrame{InstanceID: "a"}},
		{"many unknown keys", `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,` +
			`"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"s":19,"t":20,"v":1,"type":"stop","instanceId":"i"}`,
			&StopFrame{InstanceID: "i"}},
		{"nested, out of order", `{"v":1,"type":"spawned","instance":{"model":{"id":"m","provider":"p"},"state":"running","cwd":"/","instanceId":"i"}}`,
			&SpawnedFrame{Instance: InstanceInfo{InstanceID: "i", Cwd: "/", State: InstanceRunning, Model: model("p", "m")}}},
		{"nested duplicates", `{"v":1,"type":"spawned","instance":{"instanceId":"i","cwd":"/a","state":"running","cwd":"/b","model":{"provider":"p","id":"1","id":"2"}}}`,
			&SpawnedFrame{Instance: InstanceInfo{InstanceID: "i", Cwd: "/b", State: InstanceRunning, Model: model("p", "2")}}},
		{"outer fields after a nested object", `{"v":1,"type":"instances","instances":[{"instanceId":"a","cwd":"/","state":"exited"},{"cwd":"/","state":"lost","instanceId":"b"}],"id":"r"}`,
			&InstancesFrame{Header: Header{ID: "r"}, Instances: []InstanceInfo{{InstanceID: "a", Cwd: "/", State: InstanceExited}, {InstanceID: "b", Cwd: "/", State: InstanceLost}}}},
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
	t.Run("missing required field", func(t *testing.T) {
		_, err := ParseFrame([]byte(`{"v":1,"type":"stop","instanceXd":"x"}`))
		if perr := wantCode(t, err, CodeSchemaViolation); !strings.Contains(perr.Message, "instanceId") {
			t.Errorf("message %q does not name instanceId", perr.Message)
		}
	})
}

// TestDecoderStateAcrossFrames: a Decoder remembers the previous frame's
// kind and recent short strings; neither may leak into the next frame.
func TestDecoderStateAcrossFrames(t *testing.T) {
	long := strings.Repeat("x", maxCachedString+1)
	stream := strings.Join([]string{
		`{"v":1,"type":"event","instanceId":"i-1","event":1}`,
		`{"v":1,"type":"event","instanceId":"i-1","event":2}`,
		`{"v":1,"type":"event","instanceId":"i-\u0031","event":3}`, // escaped form of a cached string
		`{"v":1,"type":"event","instanceId":"i-2","event":4}`,
		`{"v":1,"type":"even","instanceId":"i-1","event":5}`,     // unknown, right after event
		`{"v":1,"type":"","instanceId":"i-1","event":6}`,         // empty type
		`{"v":1,"type":"ev\u0065nt","instanceId":"é","event":7}`, // escaped type, non-ASCII string
		`{"v":1,"type":"stop","instanceId":"i-1"}`,
		`{"v":1,"type":"event","instanceId":"` + long + `","event":8}`,
		`{"v":1,"type":"event","instanceId":"` + long + `","event":9}`,
		"{\"v\":1,\"type\":\"event\",\"instanceId\":\"i-\xff\",\"event\":10}", // invalid UTF-8
		`{"v":1,"type":"event","instanceId":"","event":11}`,
	}, "\n") + "\n"
	want := []result{
		{frame: &EventFrame{InstanceID: "i-1", Event: json.RawMessage("1")}},
		{frame: &EventFrame{InstanceID: "i-1", Event: json.RawMessage("2")}},
		{frame: &EventFrame{InstanceID: "i-1", Event: json.RawMessage("3")}},
		{frame: &EventFrame{InstanceID: "i-2", Event: json.RawMessage("4")}},
		{code: CodeUnknownFrameType},
		{code: CodeUnknownFrameType},
		{frame: &EventFrame{InstanceID: "é", Event: json.RawMessage("7")}},
		{frame: &StopFrame{InstanceID: "i-1"}},
		{frame: &EventFrame{InstanceID: long, Event: json.RawMessage("8")}},
		{frame: &EventFrame{InstanceID: long, Event: json.RawMessage("9")}},
		{frame: &EventFrame{InstanceID: "i-\uFFFD", Event: json.RawMessage("10")}},
		{frame: &EventFrame{Event: json.RawMessage("11")}},
	}
	d := NewDecoder(strings.NewReader(stream))
	var got []result
	for {
		f, err := d.Decode()
		var perr *ProtocolError
		switch {
		case err == nil:
			got = append(got, result{frame: f})
		case errors.As(err, &perr):
			got = append(got, result{code: perr.Code})
		default:
			if len(got) != len(want) {
				t.Fatalf("stream ended after %d results (%v), want %d", len(got), err, len(want))
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			return
		}
	}
}

// TestStringCache: recent short plain strings are found again; long ones
// are not kept.
func TestStringCache(t *testing.T) {
	var c stringCache
	ids := []string{"i-0123456789ab", "i-0123456789ac", "build-01", "running"}
	for _, id := range ids {
		if got := c.add([]byte(id)); got != id {
			t.Fatalf("add(%q) = %q", id, got)
		}
	}
	last := make(map[*string]string) // the latest id added to each slot
	for _, id := range ids {
		last[c.slot([]byte(id))] = id
	}
	for _, id := range ids {
		str, ok := c.find([]byte(id))
		if want := last[c.slot([]byte(id))] == id; ok != want || ok && str != id {
			t.Errorf("find(%q) = %q, %v; want found = %v", id, str, ok, want)
		}
	}
	if len(last) < len(ids)-1 {
		t.Errorf("%d ids share %d slots: the hash does not spread them", len(ids), len(last))
	}
	long := strings.Repeat("y", maxCachedString+1)
	c.add([]byte(long))
	if _, ok := c.find([]byte(long)); ok {
		t.Error("a string longer than maxCachedString was cached")
	}
}

// TestDecodeEventAllocations guards the decoder's allocation budget for a
// stream of event frames: the frame and the copy of its event, no more
// (the instance id comes from the string cache).
func TestDecodeEventAllocations(t *testing.T) {
	one, err := MarshalFrame(benchEvent)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(&cyclicReader{data: bytes.Repeat(one, 64), chunk: 64 << 10})
	if _, err := d.Decode(); err != nil { // warms the string cache
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := d.Decode(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("decoding an event frame allocates %v times, want 2", allocs)
	}
}
