package agent

import (
	"testing"
	"time"

	"example.com/pifleet/transport"
)

// A server killed between its spawn and the agent's spawned (#16 server
// campaign): the connection that asked for the worker closes while the
// worker starts. Nobody will ever learn of it (the restarted server does
// not know the spawn), so the agent stops it instead of keeping an
// instance no server reconciles; a reconnecting server's list shows none.
func TestSpawnWhoseServerConnectionClosedStopsItsWorker(t *testing.T) {
	h := newHarness(t, hopts{})
	held, release, abandoned := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	h.a.hooks.spawnHold = func(point string) {
		switch point {
		case "before-complete":
			close(held)
			<-release
		case "abandoned":
			abandoned <- struct{}{}
		}
	}
	// The agent learns of the close by reading its end, after which it
	// calls peerGone: the spawn is released only then, or it could
	// complete before the agent knew (a race of the test, not a case).
	gone := make(chan struct{}, 4)
	h.a.hooks.peerGone = func(string) { gone <- struct{}{} }
	c := h.dial(t)
	c.hello()
	f := &transport.SpawnFrame{Cwd: h.cwd, Bundle: "default"}
	f.ID = "s"
	c.send(f)
	<-held // the worker runs; its spawned is not sent yet
	c.close()
	<-gone
	close(release)
	select {
	case <-abandoned:
	case <-time.After(30 * time.Second):
		t.Fatal("the spawn of a closed connection completed: its worker runs, known to no server")
	}
	c2 := h.dial(t)
	c2.hello()
	if l := c2.roundTrip("l"); len(l.Instances) != 0 {
		t.Fatalf("instances after the abandoned spawn: %+v", l.Instances)
	}
}
