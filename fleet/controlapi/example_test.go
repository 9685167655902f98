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

func (staticBackend) Sessions(_ context.Context, f controlapi.SessionFilter) ([]controlapi.Session, error) {
	return []controlapi.Session{{Machine: "gpu-1", Name: "baseline:api", Kind: controlapi.KindBaseline, Pinned: true,
		Path: "/s/base.jsonl", GitHead: "5724c21", StaleBaseline: true}}, nil
}

func (staticBackend) Resume(_ context.Context, req controlapi.ResumeRequest, _ func(controlapi.SpawnProgress)) (controlapi.SpawnResult, error) {
	if req.Mode == controlapi.SessionAttach {
		return controlapi.SpawnResult{}, &controlapi.Error{Code: controlapi.CodeSessionPinned,
			Message: req.Session + " is a pinned session; resume it as a clone"}
	}
	return controlapi.SpawnResult{InstanceID: "i-2", FromSession: "/s/base.jsonl", SessionMode: controlapi.SessionClone, StaleBaseline: true}, nil
}

// A baseline is listed with its stale flag; a worker resumes from it as a
// clone, and attaching to it is refused with a typed error.
func ExampleClient_Resume() {
	dir, _ := os.MkdirTemp("", "pifleet")
	defer os.RemoveAll(dir)
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

	c, _ := controlapi.NewClient(addr)
	defer c.Close()
	bs, _ := c.Sessions(context.Background(), controlapi.SessionFilter{Kind: controlapi.KindBaseline})
	for _, b := range bs {
		fmt.Println(b.Machine, b.Name, "pinned:", b.Pinned, "stale:", b.StaleBaseline)
	}
	res, _ := c.Resume(context.Background(), controlapi.ResumeRequest{Session: "baseline:api"}, nil)
	fmt.Println(res.InstanceID, res.SessionMode, "stale:", res.StaleBaseline)
	_, err = c.Resume(context.Background(), controlapi.ResumeRequest{Session: "baseline:api", Mode: controlapi.SessionAttach}, nil)
	fmt.Println(errors.Is(err, controlapi.ErrSessionPinned), err)
	// Output:
	// gpu-1 baseline:api pinned: true stale: true
	// i-2 clone stale: true
	// true session_pinned: baseline:api is a pinned session; resume it as a clone
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
