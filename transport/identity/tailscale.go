package identity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// DefaultTimeout bounds every tailscale CLI call when Tailscale.Timeout is
// zero. whois sits on the accept path of every connection, so a wedged
// tailscaled must not wedge the listener.
const DefaultTimeout = 5 * time.Second

// MaxOutput caps what one CLI call may print. `status --json` of a large
// tailnet is a few hundred KiB; anything near this is not tailscale.
const MaxOutput = 16 << 20

// Output is what one run of the CLI produced.
type Output struct {
	Stdout, Stderr []byte
	// ExitCode is the process's exit status; -1 when a signal ended it.
	ExitCode int
}

// Runner runs the tailscale CLI at path bin with args. A process that ran
// and exited non-zero is reported in Output.ExitCode with a nil error; the
// error is for a process that could not run or was stopped because ctx
// ended (then it is ctx.Err()). ExecRunner is the real one; tests inject
// recorded output.
type Runner func(ctx context.Context, bin string, args ...string) (Output, error)

// ExecRunner runs bin as a child process, killing it when ctx ends.
func ExecRunner(ctx context.Context, bin string, args ...string) (Output, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	stdout := &cappedBuffer{limit: MaxOutput}
	stderr := &cappedBuffer{limit: MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A killed process may leave a grandchild holding our pipes open; do
	// not wait for it longer than this.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Output{}, ctxErr
	}
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		out.ExitCode = exitErr.ExitCode()
		return out, nil
	}
	return out, err
}

// cappedBuffer fails writes beyond limit, which stops exec's copying and
// surfaces ErrOutputTooLarge from cmd.Run.
type cappedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		return 0, ErrOutputTooLarge
	}
	return b.Buffer.Write(p)
}

// CommandError reports a tailscale CLI call that failed: it could not
// start, exited non-zero, or ran past its timeout (then errors.Is(err,
// context.DeadlineExceeded) is true).
type CommandError struct {
	// Args are the CLI arguments ("ip", "-4").
	Args []string
	// ExitCode is the exit status when the process ran and failed.
	ExitCode int
	// Stderr is what the CLI printed on standard error, trimmed.
	Stderr string
	// Err is why the process did not run to completion, if it did not.
	Err error
}

func (e *CommandError) Error() string {
	msg := "identity: tailscale " + strings.Join(e.Args, " ") + " failed"
	if e.Err != nil {
		return msg + ": " + e.Err.Error()
	}
	msg += fmt.Sprintf(" (exit %d)", e.ExitCode)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Unwrap returns why the process did not complete.
func (e *CommandError) Unwrap() error { return e.Err }

// Tailscale answers identity questions with the `tailscale` CLI. The zero
// value is ready to use; its fields must not change after first use. It is
// safe for concurrent use.
type Tailscale struct {
	// Binary is the CLI to run. Empty means: look it up (see FindBinary).
	Binary string
	// Timeout bounds each CLI call; zero means DefaultTimeout.
	Timeout time.Duration
	// Run runs the CLI; nil means ExecRunner.
	Run Runner
	// Log receives a debug line per CLI call. The zero value logs nothing.
	Log zerolog.Logger

	mu    sync.Mutex
	found string // cached result of a successful lookup

	// Lookup seams for tests; zero means the real platform.
	goos     string
	lookPath func(file string) (string, error)
	exists   func(path string) bool
}

// FallbackPaths lists where the tailscale CLI is usually installed on a
// platform (a runtime.GOOS value), in the order they are tried when
// `tailscale` is not on PATH.
func FallbackPaths(goos string) []string {
	switch goos {
	case "windows":
		return []string{`C:\Program Files\Tailscale\tailscale.exe`}
	case "darwin":
		return []string{
			"/Applications/Tailscale.app/Contents/MacOS/Tailscale",
			"/usr/local/bin/tailscale",
			"/opt/homebrew/bin/tailscale",
		}
	default:
		return []string{"/usr/bin/tailscale", "/usr/local/bin/tailscale"}
	}
}

// FindBinary returns the CLI to run: Binary if set; else `tailscale` on
// PATH; else the first of FallbackPaths that exists. A candidate counts
// only if `<candidate> version` succeeds. Success is cached; failure is
// not, so installing tailscale later works without a restart.
func (t *Tailscale) FindBinary(ctx context.Context) (string, error) {
	if t.Binary != "" {
		return t.Binary, nil
	}
	t.mu.Lock()
	found := t.found
	t.mu.Unlock()
	if found != "" {
		return found, nil
	}
	var candidates []string
	lookPath := t.lookPath
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	if p, err := lookPath("tailscale"); err == nil {
		candidates = append(candidates, p)
	}
	goos, exists := t.goos, t.exists
	if goos == "" {
		goos = runtime.GOOS
	}
	if exists == nil {
		exists = fileExists
	}
	for _, p := range FallbackPaths(goos) {
		if exists(p) {
			candidates = append(candidates, p)
		}
	}
	for _, bin := range candidates {
		if _, err := t.exec(ctx, bin, "version"); err != nil {
			t.Log.Debug().Str("binary", bin).Err(err).Msg("tailscale candidate does not work")
			continue
		}
		t.mu.Lock()
		t.found = bin
		t.mu.Unlock()
		return bin, nil
	}
	return "", ErrTailscaleNotFound
}

func fileExists(path string) bool {
	info, err := os.Stat(path)
	return err == nil && !info.IsDir()
}

// Whois asks tailscaled who owns addr (see ParseWhois for how the answer
// becomes an Identity).
func (t *Tailscale) Whois(ctx context.Context, addr netip.Addr) (Identity, error) {
	addr, err := normalize(addr)
	if err != nil {
		return Identity{}, err
	}
	out, err := t.run(ctx, "whois", "--json", addr.String())
	if err != nil {
		return Identity{}, err
	}
	id, err := ParseWhois(out)
	if err != nil {
		return Identity{}, fmt.Errorf("identity: whois %s: %w", addr, err)
	}
	return id, nil
}

// IPv4 returns this machine's tailnet IPv4 address (`tailscale ip -4`),
// the address the agent listens on.
func (t *Tailscale) IPv4(ctx context.Context) (netip.Addr, error) {
	out, err := t.run(ctx, "ip", "-4")
	if err != nil {
		return netip.Addr{}, err
	}
	return ParseIPv4(out)
}

// Status returns the tailnet as tailscaled sees it (`tailscale status
// --json`), from which the server discovers agents.
func (t *Tailscale) Status(ctx context.Context) (Status, error) {
	out, err := t.run(ctx, "status", "--json")
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(out)
}

// run finds the CLI and runs it with args, returning its standard output.
func (t *Tailscale) run(ctx context.Context, args ...string) ([]byte, error) {
	bin, err := t.FindBinary(ctx)
	if err != nil {
		return nil, err
	}
	return t.exec(ctx, bin, args...)
}

// exec runs bin once under the timeout and turns failures into
// *CommandError.
func (t *Tailscale) exec(ctx context.Context, bin string, args ...string) ([]byte, error) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	runner := t.Run
	if runner == nil {
		runner = ExecRunner
	}
	start := time.Now()
	out, err := runner(ctx, bin, args...)
	t.Log.Debug().Str("binary", bin).Strs("args", args).Int("exit", out.ExitCode).
		Dur("took", time.Since(start)).Err(err).Msg("tailscale")
	if err != nil {
		return nil, &CommandError{Args: args, Err: err}
	}
	if out.ExitCode != 0 {
		return nil, &CommandError{Args: args, ExitCode: out.ExitCode, Stderr: strings.TrimSpace(string(out.Stderr))}
	}
	return out.Stdout, nil
}
