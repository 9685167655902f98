package transport

import "encoding/json"

func init() { moreSamples = append(moreSamples, streamFrameSamples) }

// streamFrameSamples covers event_delta (frames_stream.go).
func streamFrameSamples() []Frame {
	return []Frame{
		&EventDeltaFrame{InstanceID: "i-1", Seq: 41, Updates: json.RawMessage(`[{"e":{"type":"message_update"}},["more"]]`)},
		&EventDeltaFrame{InstanceID: "i-1", Seq: 43, Base: new(42.0), Updates: json.RawMessage(`[{"u":{"type":"text_delta","contentIndex":0,"delta":"ab"},"o":[[[1,0,1],"d"]]}]`)},
	}
}
