package main

import (
	"context"
	"crypto/ed25519"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// bundleSource is the bundle the quickstart publishes (see
// bundle/README.md).
//
//go:embed bundle
var bundleSource embed.FS

const (
	// machine is the one machine of the demo: the server and the agent
	// are both on loopback, so the static identity map names every
	// loopback address "quickstart".
	machine = "quickstart"
	// bundleName is the name the bundle is published under.
	bundleName = "quickstart"
	// notesFile is the file the task asks for, read back for the review.
	notesFile = "notes.txt"
)

// The task and the feedback speak the directive language of the faux model
// (testdata/pi/README.md), which the scripted worker and the real pi with
// the faux provider both answer.
const (
	taskPrompt = "write: " + notesFile + " pifleet quickstart: first draft\n" +
		"say: I wrote a first draft of " + notesFile + "."
	rejectFeedback = "write: " + notesFile + " pifleet quickstart: revised draft, as the reviewer asked\n" +
		"say: revised: " + notesFile + " now holds the reviewer's wording."
)

// options is the command line.
type options struct {
	pi      string        // the real pi, or "" for the scripted worker
	keep    bool          // keep the temporary directory
	tmp     string        // parent of the temporary directory
	timeout time.Duration // bound on each wait
	verbose bool
	logTo   io.Writer // the fleet's and the agent's log, or nil
	self    string    // this executable (shim and scripted worker)
}

// dirs is the layout of the quickstart's temporary directory.
type dirs struct {
	root, source, registry, server, agent, sessions, piHome, piAgent, work string
}

func newDirs(root string) dirs {
	return dirs{
		root:     root,
		source:   filepath.Join(root, "bundle-src"),
		registry: filepath.Join(root, "registry"),
		server:   filepath.Join(root, "server"),
		agent:    filepath.Join(root, "agent"),
		sessions: filepath.Join(root, "sessions"),
		piHome:   filepath.Join(root, "home"),
		piAgent:  filepath.Join(root, "pi-agent"),
		work:     filepath.Join(root, "work"),
	}
}

// run is the whole quickstart; the transcript goes to out.
func run(ctx context.Context, o options, out io.Writer) (err error) {
	tr := &transcript{out: out}
	root, err := os.MkdirTemp(o.tmp, "pifleet-quickstart-")
	if err != nil {
		return fmt.Errorf("temporary directory: %w", err)
	}
	defer func() {
		if o.keep {
			tr.say("kept %s", root)
			return
		}
		if rmErr := os.RemoveAll(root); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("removing %s: %w", root, rmErr))
		}
	}()
	d := newDirs(root)
	for _, dir := range []string{d.server, d.agent, d.sessions, d.piHome, d.piAgent, d.work} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	log := zerolog.Nop()
	if o.logTo != nil {
		log = zerolog.New(zerolog.ConsoleWriter{Out: o.logTo, TimeFormat: "15:04:05.000"}).With().Timestamp().Logger()
	}

	whois, err := identity.ParseStatic("127.0.0.1="+machine, "::1="+machine)
	if err != nil {
		return err
	}
	tr.say("STATIC IDENTITY MAP IN FORCE: %s (server and agent share this machine; a real fleet identifies peers with tailscale whois)",
		strings.Join(whois.Entries(), ", "))
	if o.pi != "" {
		tr.say("worker: the real pi at %s, offline, with the bundle's faux provider (zero tokens)", o.pi)
	} else {
		tr.say("worker: the scripted pi-compatible worker (no pi, no keys, no network)")
	}
	tr.say("working in %s (%s)", root, map[bool]string{true: "kept: --keep", false: "removed at exit"}[o.keep])

	man, err := publish(d)
	if err != nil {
		return err
	}
	tr.say("published bundle %q %s: %s", man.Name, shortHash(man.BundleHash), describe(man))

	// The server's key pair is created on its first start; made here
	// first so that the agent can be told which key to obey.
	serverKey, err := auth.LoadOrCreate(filepath.Join(d.server, fleet.KeyFile))
	if err != nil {
		return err
	}
	tr.say("server key %s (the agent obeys only a server that proves it)", auth.FormatPublicKey(serverKey.Public()))

	agentAddr, stopAgent, err := startAgent(ctx, o, d, whois, serverKey.Public(), log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stopAgent()) }()
	tr.say("agent %q listening on %s", machine, agentAddr)

	f, err := fleet.New(
		fleet.WithStateDir(d.server),
		fleet.WithRegistry(d.registry, "127.0.0.1:0"),
		fleet.WithAgents(fleet.Agent{Name: machine, Addresses: []string{agentAddr}}),
		fleet.WithWhois(whois),
		// First contact of the agent's machine is answered "steer" (view,
		// spawn and steer) without asking: this is a demo on one machine.
		fleet.WithPrompter(trust.Fixed(trust.Steer)),
		fleet.WithLogger(log),
	)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	tr.sub = f.Subscribe(1 << 14)
	defer tr.sub.Close()
	if err := f.Start(ctx); err != nil {
		return err
	}
	tr.say("server: registry at %s, dialling agent %q at %s", f.RegistryURL(), machine, agentAddr)

	if err := tr.until(ctx, o.timeout, "the agent's connection", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeAgentState && c.Agent == machine && c.To == string(transport.StateEstablished)
	}); err != nil {
		return err
	}

	var inst *fleet.Instance
	defer func() {
		// A worker outlives its agent by design: on a failure, stop it so
		// that nothing keeps running after the quickstart.
		if inst != nil && err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.timeout)
			defer cancel()
			_ = inst.Stop(sctx)
		}
	}()
	// The progress callback runs on the agent connection's goroutine: it
	// only keeps the last figures, printed once the spawn returned.
	var last fleet.SpawnProgress
	var lastMu sync.Mutex
	if err := tr.during(ctx, o.timeout, "the spawn", func(ctx context.Context) error {
		var err error
		inst, err = f.Spawn(ctx, fleet.SpawnOptions{Agent: machine, Cwd: d.work, Bundle: bundleName, OnProgress: func(p fleet.SpawnProgress) {
			lastMu.Lock()
			defer lastMu.Unlock()
			if p.FilesTotal > 0 {
				last = p
			}
		}})
		return err
	}); err != nil {
		return fmt.Errorf("spawn: %w", err)
	}
	lastMu.Lock()
	tr.line("spawn", "bundle provisioned: %d files (%d fetched, %d reused), %d bytes fetched",
		last.FilesTotal, last.FilesFetched, last.FilesReused, last.BytesFetched)
	lastMu.Unlock()
	tr.say("worker %s is idle in %s", inst.ID(), d.work)

	// The task, and its first answer.
	tr.line("task", "submitting: %q", taskPrompt)
	task, err := inst.Submit(ctx, taskPrompt, fleet.PromptOptions{})
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	if _, err := tr.taskDone(ctx, o.timeout, "the task's first answer", task.ID()); err != nil {
		return err
	}
	notes, err := review(ctx, o.timeout, inst)
	if err != nil {
		return err
	}
	tr.line("review", "%s reads %q", notesFile, notes)

	// One rejection: the feedback goes back into the same session.
	tr.line("review", "reject with feedback: %q", rejectFeedback)
	escalated, err := task.Reject(ctx, rejectFeedback)
	if err != nil {
		return fmt.Errorf("reject: %w", err)
	}
	if escalated {
		return errors.New("reject: the task was escalated after one rejection (the bundle allows review.maxRejects)")
	}
	if _, err := tr.taskDone(ctx, o.timeout, "the revision's answer", task.ID()); err != nil {
		return err
	}
	revised, err := review(ctx, o.timeout, inst)
	if err != nil {
		return err
	}
	tr.line("review", "%s reads %q", notesFile, revised)
	if revised == notes {
		return fmt.Errorf("the revision left %s unchanged", notesFile)
	}

	// Accept, and stop the worker.
	tr.line("review", "accept (disposition stop)")
	if err := tr.during(ctx, o.timeout, "the accept and the stop", func(ctx context.Context) error {
		return task.Accept(ctx, transport.DispositionStop)
	}); err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	if st := inst.State(); st != fleet.StateStopped {
		return fmt.Errorf("after accept with stop the instance is %s, not stopped", st)
	}
	info := task.Info()
	tr.line("task", "%s: %s, %d rejection, verdict %q", info.TaskID, info.State, info.Rejects, info.Verdict)
	if n := tr.sub.Dropped(); n > 0 {
		tr.say("note: %d changes did not fit the subscription's buffer", n)
	}
	tr.say("ok")
	return nil
}

// publish writes the embedded bundle source to d.source and publishes it
// in the registry at d.registry.
func publish(d dirs) (*bundle.Manifest, error) {
	src, err := fs.Sub(bundleSource, "bundle")
	if err != nil {
		return nil, err
	}
	if err := os.CopyFS(d.source, src); err != nil {
		return nil, fmt.Errorf("writing the bundle source: %w", err)
	}
	m, err := registry.Publish(d.registry, bundleName, d.source, registry.PublishOptions{})
	if err != nil {
		return nil, fmt.Errorf("publishing the bundle: %w", err)
	}
	return m, nil
}

// describe says what the transcript's reader needs of a manifest.
func describe(m *bundle.Manifest) string {
	parts := []string{fmt.Sprintf("%d files", len(m.Files))}
	if m.Model != nil {
		parts = append(parts, "model "+m.Model.Primary.Provider+"/"+m.Model.Primary.ID)
	}
	if m.Review != nil && m.Review.MaxRejects != nil {
		parts = append(parts, fmt.Sprintf("review.maxRejects %v", *m.Review.MaxRejects))
	}
	parts = append(parts, fmt.Sprintf("%d skill, %d extension", len(m.Skills), len(m.Extensions)))
	return strings.Join(parts, ", ")
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}

// review reads notes.txt through the agent's file service: the reviewer
// looks at the work without asking the worker.
func review(ctx context.Context, timeout time.Duration, inst *fleet.Instance) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := inst.Read(ctx, notesFile, fleet.ReadOptions{})
	if err != nil {
		return "", fmt.Errorf("reading %s for the review: %w", notesFile, err)
	}
	if res.Text == nil {
		return "", fmt.Errorf("reading %s for the review: no text in the answer", notesFile)
	}
	return strings.TrimRight(*res.Text, "\n"), nil
}

// startAgent runs the agent in this process on 127.0.0.1 (a port the
// system picks), pinned to the server's machine. Its workers run under the
// shim, which is this program ("quickstart shim"), and are either the real
// pi or this program again ("quickstart worker").
func startAgent(ctx context.Context, o options, d dirs, whois identity.Whois, serverKey ed25519.PublicKey, log zerolog.Logger) (addr string, stop func() error, err error) {
	cfg := agent.Config{
		Machine:      machine,
		Listen:       "127.0.0.1:0",
		Pin:          trust.Pin{Machine: machine},
		Whois:        whois,
		ServerKeys:   []ed25519.PublicKey{serverKey},
		StateDir:     d.agent,
		SessionsRoot: d.sessions,
		ShimCommand:  []string{o.self, cmdShim},
		Env:          workerEnv(d),
		SessionsPoll: -1,
		Logger:       log,
	}
	if o.pi != "" {
		cfg.PiCommand = []string{o.pi}
		// Nothing of the user's pi setup is loaded: only what the bundle
		// provisions (explicit -e and --skill still load).
		cfg.PiArgs = []string{"--offline", "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files"}
	} else {
		cfg.PiCommand = []string{o.self, cmdWorker}
	}
	a, err := agent.New(cfg)
	if err != nil {
		return "", nil, err
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	stop = func() error {
		cancel()
		err := <-done
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return errors.Join(err, a.Close())
	}
	select {
	case <-a.Ready():
		return a.Addr().String(), stop, nil
	case err := <-done:
		cancel()
		return "", nil, errors.Join(fmt.Errorf("agent: %w", err), a.Close())
	case <-time.After(o.timeout):
		return "", nil, errors.Join(fmt.Errorf("agent not listening after %s", o.timeout), stop())
	}
}

// workerEnv is the workers' environment: the user's, without anything that
// could point pi at a real configuration, model or key, and with a home and
// a pi agent directory of the quickstart's own.
func workerEnv(d dirs) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", strings.HasPrefix(k, "PI_"), strings.HasPrefix(k, "PIFLEET_"), strings.HasSuffix(k, "_API_KEY"):
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+d.piHome, "PI_CODING_AGENT_DIR="+d.piAgent, "PI_OFFLINE=1", "PI_TELEMETRY=0",
		"PI_SKIP_VERSION_CHECK=1")
}
