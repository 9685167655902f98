package agent

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/fleet/agent/internal/worker"
	"example.com/pifleet/transport"
)

// pifleet's frames (transport/frames_pifleet.go, docs/protocol.md) survive
// an encode/decode round trip, and the event frame's extra seq is written.
func TestPifleetFramesRoundTrip(t *testing.T) {
	withID := func(f transport.Frame, id string) transport.Frame { f.Envelope().ID = id; return f }
	frames := []transport.Frame{
		&transport.SpawnProgressFrame{SpawnID: "r-1", Phase: transport.SpawnProvisioning, Bundle: "b", BundleHash: "ab",
			FilesTotal: new(3.0), FilesFetched: new(1.0), FilesReused: new(2.0), BytesFetched: new(10.0), BytesReused: new(20.0), Message: "fetching"},
		&transport.SpawnProgressFrame{Phase: transport.SpawnAccepted, Bundle: "b"},
		withID(&transport.EventsSinceFrame{InstanceID: "i-1", Since: 42}, "q"),
		withID(&transport.EventsReplayedFrame{InstanceID: "i-1", Since: 42, Count: 3, LastSeq: 45, Missed: 0}, "q"),
		withID(&transport.SessionEntriesFrame{InstanceID: "i-1", After: "ab12cd34", Limit: new(10.0)}, "e"),
		withID(&transport.SessionEntriesResultFrame{Path: "/s.jsonl", After: "a", Entries: json.RawMessage(`[{"type":"message","id":"b"}]`), LastEntryID: "b", More: true}, "e"),
		&transport.SessionEntriesResultFrame{Path: "/s.jsonl", Entries: json.RawMessage(`[]`), Error: &transport.FsError{Code: "unknown_entry", Message: "gone"}},
		withID(&transport.RebundleFrame{InstanceID: "i-1", Bundle: "b2", BundleHash: "ff", Registry: "http://x"}, "rb"),
		withID(&transport.RebundledFrame{InstanceID: "i-1", Switched: false, Bundle: "b1", Error: &transport.FsError{Code: "bundle_sync_failed", Message: "m"}}, "rb"),
		withID(&transport.SetToolsFrame{InstanceID: "i-1", Tools: []string{}}, "t"),
		withID(&transport.ToolsSetFrame{InstanceID: "i-1", Tools: []string{"read", "bash"}}, "t"),
		withID(&transport.ModelPinFrame{InstanceID: "i-1", Pin: false}, "p"),
		withID(&transport.ModelPinnedFrame{InstanceID: "i-1", Pin: true, Model: &transport.ModelRef{Provider: "p", ID: "m"}}, "p"),
		&transport.ModelDriftFrame{InstanceID: "i-1", Expected: transport.ModelRef{Provider: "a", ID: "b"}, Actual: transport.ModelRef{Provider: "c", ID: "d"}, Refused: true},
		&transport.SessionsRemovedFrame{Machine: "m", Paths: []string{}},
		&transport.TaskEscalatedFrame{TaskID: "t", InstanceID: "i", RequestID: "r", Reason: "why"},
	}
	for _, f := range frames {
		b, err := transport.MarshalFrame(f)
		if err != nil {
			t.Fatalf("%s: %v", f.FrameType(), err)
		}
		back, err := transport.ParseFrame(bytes.TrimSuffix(b, []byte("\n")))
		if err != nil {
			t.Fatalf("%s: %v\n%s", f.FrameType(), err, b)
		}
		if d := cmp.Diff(f, back); d != "" {
			t.Errorf("%s round trip (-want +got):\n%s", f.FrameType(), d)
		}
	}
	ev := eventFrame("i-1", worker.Event{Seq: 7, Raw: json.RawMessage(`{"type":"agent_start"}`)})
	b, err := transport.MarshalFrame(ev)
	if err != nil || !bytes.Contains(b, []byte(`"seq":7`)) || !bytes.HasPrefix(b, []byte(`{"v":1,"type":"event"`)) {
		t.Fatalf("event with seq: %s %v", b, err)
	}
	f, err := transport.ParseFrame(bytes.TrimSpace(b))
	if err != nil {
		t.Fatalf("a v1 decoder must accept it: %v", err)
	}
	if got := f.(*transport.EventFrame); got.InstanceID != "i-1" || got.Seq == nil || *got.Seq != 7 {
		t.Fatalf("decoded %+v, want instance i-1 with seq 7", got)
	}
}
