//go:build unix

package shim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"example.com/pifleet/internal/shim"
)

// An agent starts a worker under a shim, "restarts" (detaches), and
// re-adopts the still running worker with the token it kept.
func Example() {
	stateDir, err := os.MkdirTemp("", "agent-state")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(stateDir)
	ctx := context.Background()

	// Kept in the agent's state with the instance, before Start.
	id, token := "i-0123456789ab", shim.NewToken()
	socket := filepath.Join(stateDir, id+".sock")

	first, err := shim.Start(ctx, shim.StartConfig{
		// An agent runs its own binary here (os.Executable(), Args
		// {"shim"}); in this example the test binary plays that part.
		Executable: os.Args[0],
		Args:       []string{"shim"},
		Shim: shim.Config{
			InstanceID: id,
			Token:      token,
			Socket:     socket,
			Command:    []string{"/bin/sh", "-c", `while read -r l; do echo "{\"echo\":\"$l\"}"; done`},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	first.Write(ctx, []byte("one\n"))
	ev := <-first.Events()
	fmt.Printf("line %d: %s\n", ev.Seq, ev.Data)
	first.Ack(ev.Seq)
	first.Detach(ctx) // the agent goes away; the worker keeps running

	c, err := shim.Attach(ctx, shim.AttachConfig{Socket: socket, InstanceID: id, Token: token})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.Write(ctx, []byte("two\n"))
	c.CloseStdin(ctx) // the worker exits on EOF, like pi
	for ev := range c.Events() {
		switch ev.Kind {
		case shim.EventLine:
			fmt.Printf("line %d: %s\n", ev.Seq, ev.Data)
		case shim.EventExit:
			fmt.Printf("record %d: %v\n", ev.Seq, ev.Exit)
		}
		c.Ack(ev.Seq) // acknowledging the exit lets the shim finish
	}
	<-first.ShimExited()
	fmt.Println("shim finished cleanly:", c.Err() == nil)
	// Output:
	// line 1: {"echo":"one"}
	// line 2: {"echo":"two"}
	// record 3: exit code 0
	// shim finished cleanly: true
}
