package fleet_test

import (
	"context"
	"fmt"
	"log"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

func ExampleParseAgent() {
	a, err := fleet.ParseAgent("buildbox=100.64.0.7:9788,buildbox.tail1234.ts.net:9788")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Name, a.Addresses)
	_, err = fleet.ParseAgent("buildbox")
	fmt.Println(err)
	// Output:
	// buildbox [100.64.0.7:9788 buildbox.tail1234.ts.net:9788]
	// fleet: invalid agent: "buildbox" is not NAME=HOST:PORT
}

// The whole loop: spawn a worker, give it a tracked task, reject the first
// result with feedback, accept the revision.
func Example() {
	ctx := context.Background()
	done := make(chan fleet.TaskReport, 1)
	f, err := fleet.New(
		fleet.WithStateDir("/var/lib/pifleet"),
		fleet.WithRegistry("/var/lib/pifleet/registry", "100.64.0.1:9787"),
		fleet.WithAgents(fleet.Agent{Name: "buildbox", Addresses: []string{"100.64.0.7:9788"}}),
		fleet.WithPrompter(trust.Fixed(trust.Steer)),
		fleet.WithTaskDone(func(r fleet.TaskReport) { done <- r }),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if err := f.Start(ctx); err != nil {
		log.Fatal(err)
	}
	w, err := f.Spawn(ctx, "buildbox", "/home/ana/api", "default", fleet.SpawnOptions{})
	if err != nil {
		log.Fatal(err)
	}
	task, err := w.Submit(ctx, "make the failing tests pass", fleet.PromptOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println((<-done).Summary)
	if _, err := task.Reject(ctx, "the fix must not skip tests"); err != nil {
		log.Fatal(err)
	}
	fmt.Println((<-done).Summary)
	if err := task.Accept(ctx, transport.DispositionStop); err != nil {
		log.Fatal(err)
	}
}
