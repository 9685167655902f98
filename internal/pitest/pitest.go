// Package pitest starts pi workers for tests: the real pi (offline, with
// the faux provider of testdata/pi) and examples/scriptedworker, each
// isolated in temporary directories and wrapped in a pirpc.Client.
//
// A test that needs a worker:
//
//	w := pitest.Start(t, pitest.Scripted, pitest.Options{})   // or pitest.RealPi
//	st, err := w.Client.GetState(ctx)
//	w.Client.Prompt(ctx, "bash: echo hi")
//	lines := w.UntilSettled(t)
//
// Start with RealPi skips the test when PIFLEET_PI is unset (.ci/run sets
// it). A test that spawns the worker itself (an agent supervisor, say) gets
// the command line from Command.
package pitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"example.com/pifleet/internal/syncbuf"
	"example.com/pifleet/transport/pirpc"
)

// Kind selects a worker implementation.
type Kind int

const (
	// Scripted is examples/scriptedworker, built once per test binary.
	Scripted Kind = iota
	// RealPi is the npm pi named by PIFLEET_PI, with the faux provider.
	RealPi
)

func (k Kind) String() string {
	if k == RealPi {
		return "real pi"
	}
	return "scripted"
}

// Kinds lists both workers, for table-driven tests.
func Kinds() []Kind { return []Kind{Scripted, RealPi} }

// EnvPi names the real pi binary (exported by .ci/run).
const EnvPi = "PIFLEET_PI"

// SkipMessage is the reason a real-pi test is skipped.
const SkipMessage = "real pi not found: set PIFLEET_PI or run .ci/run"

// Find returns the real pi's path from PIFLEET_PI, or skips the test when
// it is unset. PIFLEET_PI naming a file that is not there fails the test:
// whoever set it meant the real pi to be tested.
func Find(t testing.TB) string {
	t.Helper()
	p := os.Getenv(EnvPi)
	if p == "" {
		t.Skip(SkipMessage)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("PIFLEET_PI=%s: %v (unset it to skip the real-pi tests)", p, err)
	}
	return p
}

// SkipNotice is the line AnnounceSkips prints.
const SkipNotice = "pifleet: PIFLEET_PI is not set, so the tests against the real pi were skipped (set it to pi 0.73.1's binary, or run .ci/run)"

// AnnounceSkips tells the person running the tests, once, that the real-pi
// tests are skipped. go test shows nothing of a passing package in its
// list mode, so the line goes to the terminal (/dev/tty) when there is
// one; with -v (and in CI logs, which run -v or -json) it goes to the
// test output instead, where it is kept. It does nothing when PIFLEET_PI
// is set. It parses the test flags: call it from TestMain.
func AnnounceSkips() {
	if os.Getenv(EnvPi) != "" {
		return
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Verbose() {
		fmt.Println(SkipNotice)
		return
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		fmt.Println(SkipNotice) // no terminal: the output is all there is
		return
	}
	defer tty.Close()
	_, _ = tty.WriteString(SkipNotice + "\n")
}

// RepoRoot returns the module's root directory (where go.mod is).
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("pitest: cannot locate its own source file")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("pitest: no go.mod at %s: %v", root, err)
	}
	return root
}

// FauxProvider returns the path of testdata/pi/faux-provider.ts.
func FauxProvider(t testing.TB) string {
	t.Helper()
	return filepath.Join(RepoRoot(t), "testdata", "pi", "faux-provider.ts")
}

var build struct {
	sync.Mutex
	path string
}

// ScriptedWorker builds examples/scriptedworker (once per test binary; the
// binary is kept in the temp dir under a hash of its sources, so other
// test binaries reuse it) and returns its path.
func ScriptedWorker(t testing.TB) string {
	t.Helper()
	build.Lock()
	defer build.Unlock()
	if build.path != "" {
		return build.path
	}
	root := RepoRoot(t)
	src := filepath.Join(root, "examples", "scriptedworker")
	// Hash every Go source under the worker's directory (its main and the
	// scripted package it wraps), so a change anywhere rebuilds it.
	var files []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("pitest: no scripted worker sources in %s (%v)", src, err)
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("pitest: %v", err)
		}
		rel, _ := filepath.Rel(src, f)
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
	}
	dir := filepath.Join(os.TempDir(), "pifleet-test-bin")
	out := filepath.Join(dir, "scriptedworker-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(out); err == nil {
		build.path = out
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("pitest: %v", err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, "./examples/scriptedworker")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pitest: building the scripted worker: %v\n%s", err, msg)
	}
	// Rename is atomic: concurrent test binaries each install a whole file.
	if err := os.Rename(tmp, out); err != nil {
		t.Fatalf("pitest: %v", err)
	}
	build.path = out
	return out
}

// DefaultSettings is written to the worker's settings.json unless Options
// says otherwise: auto-retry after 10 ms, 20 ms, … instead of 2 s, 4 s, …
const DefaultSettings = `{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":10}}`

// Options configure a worker. The zero value gives a fresh, isolated
// worker with a session directory.
type Options struct {
	// Cwd is the worker's working directory (default: a new temp dir).
	Cwd string
	// AgentDir is PI_CODING_AGENT_DIR (default: a new temp dir).
	AgentDir string
	// SessionDir is --session-dir (default: <AgentDir>/sessions-test).
	SessionDir string
	// Session opens or creates this session file (--session) instead.
	Session string
	// NoSession runs with --no-session.
	NoSession bool
	// Settings is the content of settings.json (default DefaultSettings).
	Settings string
	// Args are extra command-line arguments.
	Args []string
	// Env are extra environment variables ("K=V"), for example
	// PIFLEET_FAUX_COST=2.
	Env []string
	// Client configures the pirpc.Client.
	Client pirpc.Options
}

// Spec is a worker command line, for tests that start the process
// themselves.
type Spec struct {
	Path string
	Args []string
	// Env is the complete environment (isolated HOME and agent dir).
	Env []string
	Dir string
	// AgentDir and SessionDir are where the worker keeps its state.
	AgentDir, SessionDir string
}

// Command prepares the directories and returns the command line of an
// isolated, offline worker of that kind (skipping the test for RealPi when
// pi is absent).
func Command(t testing.TB, kind Kind, opts Options) Spec {
	t.Helper()
	var path string
	var args []string
	switch kind {
	case RealPi:
		path = Find(t)
		args = []string{"--mode", "rpc", "--offline", "--no-extensions", "-e", FauxProvider(t),
			"--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files",
			"--provider", "faux", "--model", "faux-1"}
	default:
		path = ScriptedWorker(t)
		args = []string{"--mode", "rpc", "--provider", "faux", "--model", "faux-1"}
	}
	s := Spec{Path: path, Dir: opts.Cwd, AgentDir: opts.AgentDir}
	if s.Dir == "" {
		s.Dir = t.TempDir()
	}
	if s.AgentDir == "" {
		s.AgentDir = t.TempDir()
	}
	settings := opts.Settings
	if settings == "" {
		settings = DefaultSettings
	}
	if err := os.WriteFile(filepath.Join(s.AgentDir, "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatalf("pitest: %v", err)
	}
	switch {
	case opts.NoSession:
		args = append(args, "--no-session")
	case opts.Session != "":
		args = append(args, "--session", opts.Session)
	default:
		s.SessionDir = opts.SessionDir
		if s.SessionDir == "" {
			s.SessionDir = filepath.Join(s.AgentDir, "sessions-test")
		}
		args = append(args, "--session-dir", s.SessionDir)
	}
	s.Args = append(args, opts.Args...)
	home := filepath.Join(s.AgentDir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatalf("pitest: %v", err)
	}
	s.Env = append(cleanEnv(), "HOME="+home, "PI_CODING_AGENT_DIR="+s.AgentDir, "PI_OFFLINE=1",
		"PI_TELEMETRY=0", "PI_SKIP_VERSION_CHECK=1")
	s.Env = append(s.Env, opts.Env...)
	return s
}

// cleanEnv is the test's environment without anything that could point pi
// at real configuration or a real model.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", strings.HasPrefix(k, "PI_"), strings.HasPrefix(k, "PIFLEET_FAUX_"),
			strings.HasSuffix(k, "_API_KEY"):
			continue
		}
		env = append(env, kv)
	}
	return env
}

// Worker is a running worker process and its client.
type Worker struct {
	Kind   Kind
	Spec   Spec
	Client *pirpc.Client
	Cmd    *exec.Cmd
	// Started is when the process was started.
	Started time.Time

	stderr syncbuf.Buffer // the start of it: 64 KiB are enough to diagnose
	exited chan struct{}
	exit   error
}

// Start starts a worker of that kind and stops it when the test ends.
func Start(t testing.TB, kind Kind, opts Options) *Worker {
	t.Helper()
	spec := Command(t, kind, opts)
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{Kind: kind, Spec: spec, exited: make(chan struct{})}
	w.stderr.Limit = 64 << 10
	w.Cmd = exec.Command(spec.Path, spec.Args...)
	w.Cmd.Dir, w.Cmd.Env = spec.Dir, spec.Env
	w.Cmd.Stdin, w.Cmd.Stdout, w.Cmd.Stderr = inR, outW, &w.stderr
	w.Started = time.Now()
	if err := w.Cmd.Start(); err != nil {
		t.Fatalf("pitest: starting %s: %v", kind, err)
	}
	inR.Close()
	outW.Close()
	w.Client = pirpc.NewClient(inW, outR, opts.Client)
	go func() {
		w.exit = w.Cmd.Wait()
		close(w.exited)
	}()
	t.Cleanup(func() { w.Stop(t) })
	return w
}

// Stderr returns what the worker wrote on stderr so far.
func (w *Worker) Stderr() string { return w.stderr.String() }

// Exited is closed when the process has exited.
func (w *Worker) Exited() <-chan struct{} { return w.exited }

// ExitErr is the process's exit status once Exited is closed.
func (w *Worker) ExitErr() error {
	<-w.exited
	return w.exit
}

// Stop ends the worker: stdin EOF (pi exits at once), then SIGKILL if it
// is still alive after 10 s. It is safe to call more than once.
func (w *Worker) Stop(t testing.TB) {
	t.Helper()
	_ = w.Client.CloseInput()
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		t.Logf("pitest: %s worker ignored stdin EOF; killing it", w.Kind)
		_ = w.Cmd.Process.Kill()
		<-w.exited
	}
	w.Client.Close()
	<-w.Client.Done()
	if t.Failed() {
		if s := w.Stderr(); s != "" {
			t.Logf("pitest: %s worker stderr:\n%s", w.Kind, s)
		}
	}
}

// DefaultWait bounds the helpers that wait for lines.
var DefaultWait = 60 * time.Second

// Until reads Lines until one satisfies stop and returns every line read,
// that one included. It fails the test if the stream ends or DefaultWait
// passes first.
func (w *Worker) Until(t testing.TB, stop func(pirpc.Line) bool) []pirpc.Line {
	t.Helper()
	var lines []pirpc.Line
	deadline := time.NewTimer(DefaultWait)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-w.Client.Lines():
			if !ok {
				t.Fatalf("pitest: %s worker stream ended while waiting (stderr: %s)", w.Kind, w.Stderr())
			}
			lines = append(lines, l)
			if stop(l) {
				return lines
			}
		case <-deadline.C:
			t.Fatalf("pitest: %s worker: nothing matched within %v; got %d lines", w.Kind, DefaultWait, len(lines))
		}
	}
}

// UntilSettled reads Lines up to and including the next settle.
func (w *Worker) UntilSettled(t testing.TB) []pirpc.Line {
	t.Helper()
	return w.Until(t, func(l pirpc.Line) bool { return l.Settled != nil })
}

// SessionEntries reads a session file: its header and entries, each as a
// generic JSON object.
func SessionEntries(t testing.TB, path string) (header map[string]any, entries []map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("pitest: %v", err)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("pitest: %s line %d: %v", path, i+1, err)
		}
		if i == 0 {
			header = m
			continue
		}
		entries = append(entries, m)
	}
	return header, entries
}
