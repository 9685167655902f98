package worker

import (
	"strings"
	"testing"

	"example.com/pifleet/internal/shim"
)

// The ack after a message_update waits for a later line, within its
// bounds in lines and bytes; the ack after any other line (the
// message_end that follows updates, a response, a gap, the exit) is sent
// at once, and what waited goes with it.
func TestAckAfterAnUpdateWaitsWithinBounds(t *testing.T) {
	line := func(s string) shim.Event { return shim.Event{Kind: shim.EventLine, Data: []byte(s)} }
	update := line(`{"type":"message_update","assistantMessageEvent":{"type":"text_delta"}}`)
	var h heldAcks
	for i := range maxHeldAckLines {
		if !h.wait(update, 1<<20) {
			t.Fatalf("update %d: ack sent at once", i+1)
		}
	}
	if h.wait(update, 1<<20) {
		t.Fatalf("%d updates waited: more than the bound", maxHeldAckLines+1)
	}
	if !h.wait(update, 1<<20) {
		t.Fatal("the count did not start again after the ack")
	}
	for _, ev := range []shim.Event{line(`{"type":"message_end","message":{}}`), line(`{"type":"response"}`),
		{Kind: shim.EventGap}, {Kind: shim.EventExit}, {Kind: shim.EventLine, Overlong: 1 << 30}} {
		if h.wait(ev, 1<<20) {
			t.Errorf("%+v: ack waits", ev)
		}
	}
	big := line(`{"type":"message_update","message":"` + strings.Repeat("x", 600) + `"}`)
	if !h.wait(big, 1000) || h.wait(big, 1000) {
		t.Error("updates waited beyond the byte bound")
	}
	if h.wait(update, 0) {
		t.Error("a shim without a window still got a held ack")
	}
}
