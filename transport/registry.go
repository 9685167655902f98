package transport

import (
	"fmt"
	"slices"
)

// frameKinds is the registry: every frame type the codec knows. Adding a
// frame type is one line here (plus its struct and Schema method).
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

// NewFrame returns a zero frame of the named type, or false when the type
// is unknown.
func NewFrame(frameType string) (Frame, bool) {
	k, ok := registry[frameType]
	if !ok {
		return nil, false
	}
	return k.new(), true
}

// FrameTypes returns the wire names of every known frame type, sorted.
func FrameTypes() []string {
	names := make([]string, 0, len(frameKinds))
	for _, k := range frameKinds {
		names = append(names, k.name)
	}
	slices.Sort(names)
	return names
}
