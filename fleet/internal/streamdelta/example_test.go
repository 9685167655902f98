package streamdelta_test

import (
	"fmt"
	"strings"

	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/transport"
)

func Example() {
	lines := []string{
		`{"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0,"partial":{"role":"assistant","content":[{"type":"text","text":""}]}},"message":{"role":"assistant","content":[{"type":"text","text":""}]}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hello","partial":{"role":"assistant","content":[{"type":"text","text":"Hello"}]}},"message":{"role":"assistant","content":[{"type":"text","text":"Hello"}]}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":", world","partial":{"role":"assistant","content":[{"type":"text","text":"Hello, world"}]}},"message":{"role":"assistant","content":[{"type":"text","text":"Hello, world"}]}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"!","partial":{"role":"assistant","content":[{"type":"text","text":"Hello, world!"}]}},"message":{"role":"assistant","content":[{"type":"text","text":"Hello, world!"}]}}`,
	}
	// Agent side: one encoder per worker, a chain and a batch per connection.
	var enc streamdelta.Encoder
	var chain streamdelta.Chain
	batch := streamdelta.NewBatch("i-1")
	for i, l := range lines {
		c := enc.Encode(uint64(i+1), []byte(l))
		batch.Add(&chain, &c)
	}
	frame := batch.Frame()
	// The first update is whole; the next is coded against it; the last
	// two repeat its shape and carry only their delta.
	u := string(frame.Updates)
	fmt.Println(u[strings.Index(u, `{"u"`):])

	// Server side: one rebuilder per connection.
	rb := streamdelta.NewRebuilder(transport.MaxFrameBytes)
	same := 0
	_ = rb.RebuildFrame(frame, func(ev *transport.EventFrame, _ []byte) {
		if string(ev.Event) == lines[int(*ev.Seq)-1] {
			same++
		}
	})
	fmt.Println(same, "of", len(lines), "events rebuilt byte for byte")
	// Output:
	// {"u":{"type":"text_delta","contentIndex":0,"delta":"Hello"},"o":[[[1,0,1],"d"]]},[", world"],["!"]]
	// 4 of 4 events rebuilt byte for byte
}
