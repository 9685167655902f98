package controlapi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"example.com/pifleet/fleet/controlapi"
)

// staticBackend answers Status with one idle instance and refuses
// everything else; a real server uses its fleet.
type staticBackend struct{ controlapi.Backend }

func (staticBackend) Status(context.Context) (controlapi.Status, error) {
	return controlapi.Status{Instances: []controlapi.Instance{{ID: "i-1", Agent: "gpu-1", State: "idle", Bundle: "default"}}}, nil
}

func (staticBackend) Stop(_ context.Context, id string) error {
	return &controlapi.Error{Code: controlapi.CodeUnknownInstance, Message: fmt.Sprintf("no instance %q", id)}
}

func Example() {
	dir, _ := os.MkdirTemp("", "pifleet")
	defer os.RemoveAll(dir)

	// Server side: the unix socket in the state directory.
	addr := controlapi.DefaultAddr(dir)
	l, err := controlapi.Listen(addr, controlapi.ListenOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- controlapi.Serve(ctx, l, controlapi.NewServer(staticBackend{}), time.Second) }()
	defer func() { stop(); <-done }()

	// Client side.
	c, _ := controlapi.NewClient(addr)
	defer c.Close()
	st, err := c.Status(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, in := range st.Instances {
		fmt.Println(in.ID, in.Agent, in.State, in.Bundle)
	}
	err = c.Stop(context.Background(), "i-9")
	fmt.Println(errors.Is(err, controlapi.ErrUnknownInstance), err)
	// Output:
	// i-1 gpu-1 idle default
	// true unknown_instance: no instance "i-9"
}
