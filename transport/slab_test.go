package transport

import (
	"bytes"
	"math"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// Frames and raw values decoded one after another come out of shared
// blocks; none may see a later frame's bytes, and appending to one must
// not write into its neighbour.
func TestDecodedFramesDoNotShareMemory(t *testing.T) {
	var stream strings.Builder
	const n = 3 * frameBlock // several blocks of frames, and of raw bytes
	for i := range n {
		ev := `{"type":"message_update","n":` + strings.Repeat("7", 1+i%40) + `}`
		stream.WriteString(`{"v":1,"type":"event","instanceId":"i-1","event":` + ev + "}\n")
	}
	d := NewDecoder(strings.NewReader(stream.String()))
	var got []*EventFrame
	for range n {
		f, err := d.Decode()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.(*EventFrame))
	}
	want := make([][]byte, n)
	for i, f := range got {
		if cap(f.Event) != len(f.Event) {
			t.Fatalf("frame %d: event capacity %d beyond its length %d", i, cap(f.Event), len(f.Event))
		}
		want[i] = bytes.Clone(f.Event)
		_ = append(f.Event, "overwrite"...) // must reallocate
		for j := range i {
			if got[j] == f {
				t.Fatalf("frames %d and %d are one struct", j, i)
			}
		}
	}
	for i, f := range got {
		if !bytes.Equal(f.Event, want[i]) {
			t.Fatalf("frame %d: event changed to %s, want %s", i, f.Event, want[i])
		}
	}
}

// A raw value too long for a block still decodes whole.
func TestLongRawValueDecodes(t *testing.T) {
	ev := `{"type":"message_update","text":"` + strings.Repeat("x", 2*rawBlock) + `"}`
	f, err := ParseFrame([]byte(`{"v":1,"type":"event","instanceId":"i-1","event":` + ev + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.(*EventFrame).Event); got != ev {
		t.Fatalf("event of %d bytes, want %d", len(got), len(ev))
	}
}

// Every registered kind has its own slab index.
func TestFrameKindsHaveDistinctIndexes(t *testing.T) {
	for i, k := range frameKinds {
		if k.index != i {
			t.Errorf("%s: index %d, want %d", k.name, k.index, i)
		}
		if registry[k.name].index != i {
			t.Errorf("%s: registry index %d, want %d", k.name, registry[k.name].index, i)
		}
	}
}

// A decoder that decodes one frame of a type (a connection's hello)
// allocates one struct for it, not a block: 10,000 connections would
// otherwise each keep a block of 16 hellos, and of every other frame
// type they decode a few times.
func TestOneFrameOfATypeAllocatesNoBlock(t *testing.T) {
	hello := `{"v":1,"type":"hello","machine":"box-1","role":"agent","packageVersion":"1","platform":"linux"}` + "\n"
	spawned := `{"v":1,"type":"spawned","id":"r-1","instance":{"instanceId":"i-1","cwd":"/w","state":"idle"}}` + "\n"
	for _, tc := range []struct {
		line string
		size uintptr
	}{{hello, unsafe.Sizeof(HelloFrame{})}, {spawned, unsafe.Sizeof(SpawnedFrame{})}} {
		// The least of a few decodes: the count is the whole process's,
		// and goroutines an earlier test left closing can add to one.
		got := uint64(math.MaxUint64)
		for range 5 {
			d := NewDecoder(strings.NewReader(tc.line))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := d.Decode(); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			got = min(got, after.TotalAlloc-before.TotalAlloc)
		}
		// The frame's struct, its strings and the decoder's first
		// buffers: far less than frameBlock structs.
		if limit := uint64(frameBlock/2) * uint64(tc.size); got > limit {
			t.Errorf("decoding one %.20s… allocated %d bytes, more than %d (%d structs of %d bytes)", tc.line, got, limit, frameBlock/2, tc.size)
		}
	}
}
