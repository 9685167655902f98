package transport

import (
	"fmt"
	"slices"
)

// frameKinds is the registry: every frame type the codec knows. Adding a
// frame type is one line here (plus its struct and schema method; see
// "Adding a frame type" below).
//
// Adding a frame type:
//
// A new frame (for a feature the reference lacks) is three things, all in
// this package: a struct that embeds Header with a FrameType method naming
// it on the wire; its schema method, which lists every field once (wire
// name, Go field, required or optional) and is at the same time its
// validation and its encoding; and one line in the registry, frameKinds in
// this file. For example:
//
//	// ReplayFrame (A→S) replays buffered events after a reconnect.
//	type ReplayFrame struct {
//		Header
//		InstanceID string
//		Since      float64
//		Events     []ReplayedEvent // ReplayedEvent has a schema method too
//	}
//
//	func (*ReplayFrame) FrameType() string { return "event_replay" }
//
//	func (f *ReplayFrame) schema(s *schema) {
//		s.String("instanceId", &f.InstanceID, required)
//		s.Number("since", &f.Since)
//		structsField(s, "events", &f.Events, required)
//	}
//
//	// and in frameKinds:
//	kind[ReplayFrame](),
//
// Then give it a sample for the round-trip tests (referenceSamples in
// samples_test.go, or a moreSamples hook in the new frames' own test file;
// a test fails while a registered type has none) and document the frame,
// with the reason for it, in the project's protocol file.
var frameKinds = []frameKind{
	kind[HelloFrame](),
	kind[HeartbeatFrame](),
	kind[ErrorFrame](),
	kind[SpawnFrame](),
	kind[SpawnedFrame](),
	kind[SpawnErrorFrame](),
	kind[StopFrame](),
	kind[StoppedFrame](),
	kind[ListFrame](),
	kind[InstancesFrame](),
	kind[RPCFrame](),
	kind[EventFrame](),
	kind[TaskDoneFrame](),
	kind[TaskDoneAckFrame](),
	kind[TaskAcceptFrame](),
	kind[TaskRejectFrame](),
	kind[DeliverFrame](),
	kind[DeliveredFrame](),
	kind[UIRequestFrame](),
	kind[UIResponseFrame](),
	kind[SessionsReportFrame](),
	kind[SessionSearchFrame](),
	kind[SessionHitsFrame](),
	kind[ExecStartFrame](),
	kind[ExecStartedFrame](),
	kind[ExecOutputFrame](),
	kind[ExecExitFrame](),
	kind[ExecAbortFrame](),
	kind[ExecAbortedFrame](),
	kind[ExecListFrame](),
	kind[ExecInstancesFrame](),
	kind[FsReadFrame](),
	kind[FsListFrame](),
	kind[FsGrepFrame](),
	kind[FsDiffFrame](),
	kind[FsResultFrame](),
}

type frameKind struct {
	name  string
	index int                 // its place in frameKinds
	new   func() Frame        // one zero frame
	slab  func() func() Frame // a constructor that allocates in blocks (see slabOf)
}

// kind registers the frame struct T; its wire name comes from FrameType.
func kind[T any, P interface {
	*T
	Frame
}]() frameKind {
	return frameKind{name: P(new(T)).FrameType(), new: func() Frame { return P(new(T)) }, slab: slabOf[T, P]}
}

// registry maps a wire name to its constructor. A plain map has no
// prototype: "toString", "__proto__" and "constructor" are not frame types
// (the TS quirk of reference 1.3 is deliberately not replicated).
var registry = func() map[string]frameKind {
	m := make(map[string]frameKind, len(frameKinds))
	kinds := frameKinds
	frameKinds = frameKinds[:0:0]
	for _, k := range kinds {
		addKind(m, k)
	}
	return m
}()

// addKind registers k in m and frameKinds, where it takes the next index.
func addKind(m map[string]frameKind, k frameKind) {
	if _, dup := m[k.name]; dup {
		panic(fmt.Sprintf("transport: frame type %q registered twice", k.name))
	}
	k.index = len(frameKinds)
	frameKinds = append(frameKinds, k)
	m[k.name] = k
}

// newFrame returns a zero frame of the named type, or false when the type
// is unknown.
func newFrame(frameType string) (Frame, bool) {
	k, ok := registry[frameType]
	if !ok {
		return nil, false
	}
	return k.new(), true
}

// frameTypes returns the wire names of every known frame type, sorted.
func frameTypes() []string {
	names := make([]string, 0, len(frameKinds))
	for _, k := range frameKinds {
		names = append(names, k.name)
	}
	slices.Sort(names)
	return names
}
