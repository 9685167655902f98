//go:build unix

package fleet_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// The whole loop: spawn a worker, give it a tracked task, reject the first
// result with feedback, accept the revision. The agent here runs in this
// process on loopback with a scripted worker that answers the "say:"
// directives (newExampleAgent); in a real fleet it is pifleet-agent on
// another machine and the worker is pi.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	demo, err := newExampleAgent("buildbox")
	if err != nil {
		log.Fatal(err)
	}
	defer demo.Close()

	done := make(chan fleet.TaskReport, 1)
	f, err := fleet.New(
		fleet.WithStateDir(demo.StateDir),
		fleet.WithRegistry(demo.Registry, "127.0.0.1:0"),
		fleet.WithAgents(fleet.Agent{Name: "buildbox", Addresses: []string{demo.Addr}}),
		fleet.WithPrompter(trust.Fixed(trust.Steer)), // first contact: trust it to view, spawn and steer
		fleet.WithTaskDone(func(r fleet.TaskReport) { done <- r }),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if err := f.Start(ctx); err != nil {
		log.Fatal(err)
	}
	// Spawn waits for the agent's connection, then for the worker to be
	// idle.
	w, err := f.Spawn(ctx, fleet.SpawnOptions{Agent: "buildbox", Cwd: demo.Cwd, Bundle: "default"})
	if err != nil {
		log.Fatal(err)
	}
	task, err := w.Submit(ctx, "say: a first draft", fleet.PromptOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println((<-done).Summary)
	if _, err := task.Reject(ctx, "say: a revised draft, with tests"); err != nil {
		log.Fatal(err)
	}
	fmt.Println((<-done).Summary)
	if err := task.Accept(ctx, transport.DispositionStop); err != nil {
		log.Fatal(err)
	}
	fmt.Println("verdict:", task.Info().Verdict)
	fmt.Println("worker:", w.State())
	// Output:
	// a first draft
	// a revised draft, with tests
	// verdict: accepted by application
	// worker: stopped
}

// exampleAgent is what Example needs of a machine: a bundle registry with
// a bundle named "default", an agent daemon listening on loopback, a
// working directory for the worker, and a state directory for the fleet.
type exampleAgent struct {
	Addr, Registry, Cwd, StateDir string
	root                          string
	stop                          func() error
}

func newExampleAgent(machine string) (_ *exampleAgent, err error) {
	root, err := os.MkdirTemp("", "pfex") // short: the shims' socket paths
	if err != nil {
		return nil, err
	}
	d := &exampleAgent{root: root, Registry: filepath.Join(root, "registry"), Cwd: filepath.Join(root, "work"),
		StateDir: filepath.Join(root, "server"), stop: func() error { return nil }}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.Close())
		}
	}()
	src := filepath.Join(root, "bundle")
	for _, dir := range []string{src, d.Cwd, d.StateDir, filepath.Join(root, "home")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(src, "bundle.json"), []byte(`{"review": {"maxRejects": 3}}`), 0o644); err != nil {
		return nil, err
	}
	if _, err := registry.Publish(d.Registry, "default", src, registry.PublishOptions{}); err != nil {
		return nil, err
	}
	whois, err := identity.ParseStatic("127.0.0.1=orchestrator")
	if err != nil {
		return nil, err
	}
	// The server's key pair, made before the fleet's first start so that
	// the agent can be given the key to obey.
	serverKey, err := auth.LoadOrCreate(filepath.Join(d.StateDir, fleet.KeyFile))
	if err != nil {
		return nil, err
	}
	a, err := agent.New(agent.Config{
		Machine: machine, Listen: "127.0.0.1:0",
		Pin: trust.Pin{Machine: "orchestrator"}, Whois: whois, ServerKeys: []ed25519.PublicKey{serverKey.Public()},
		StateDir: filepath.Join(root, "agent"), SessionsRoot: filepath.Join(root, "sessions"),
		PiCommand: []string{os.Args[0], "worker"}, ShimCommand: []string{os.Args[0], "shim"},
		Env: exampleWorkerEnv(filepath.Join(root, "home")), SessionsPoll: -1,
	})
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(actx) }()
	d.stop = func() error {
		cancel()
		err := <-ran
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return errors.Join(err, a.Close())
	}
	select {
	case <-a.Ready():
	case err := <-ran:
		return nil, fmt.Errorf("agent: %w", err)
	case <-time.After(30 * time.Second):
		return nil, errors.New("agent not listening after 30s")
	}
	d.Addr = a.Addr().String()
	return d, nil
}

// Close stops the agent, ends any worker left running and removes the
// directories.
func (d *exampleAgent) Close() error {
	err := d.stop()
	ctx, cancel := context.WithTimeout(context.Background(), e2ekit.SweepTimeout)
	defer cancel()
	left, serr := e2ekit.Sweep(ctx, filepath.Join(d.root, "agent"))
	for _, l := range left {
		err = errors.Join(err, fmt.Errorf("left running: %s", l))
	}
	return errors.Join(err, serr, os.RemoveAll(d.root))
}

// exampleWorkerEnv is this process's environment without anything that
// points a worker at a real pi configuration or key.
func exampleWorkerEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "HOME" || strings.HasPrefix(k, "PI_") || strings.HasPrefix(k, "PIFLEET_") || strings.HasSuffix(k, "_API_KEY") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "PI_CODING_AGENT_DIR="+filepath.Join(home, ".pi"))
}
