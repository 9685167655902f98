// Command quickstart is the README's first command: a whole fleet on one
// machine, with no pi and no keys.
//
//	go run ./examples/quickstart [--pi PATH] [--keep] [--timeout 60s] [--verbose]
//
// It starts a fleet server and an agent in this process, talking real TCP
// on 127.0.0.1 with ports the system picks; publishes a small bundle
// (embedded in this program: a skill, a README, bundle.json with the faux
// model and review.maxRejects, and the offline faux provider extension);
// spawns a worker; submits a task; reads the file the worker wrote through
// the agent's file service, rejects the task once with feedback, accepts
// the revision (which stops the worker); and prints one line per state
// transition and every answer of the worker. It ends with "quickstart: ok"
// and exit status 0, or with an error and exit status 1.
//
// The worker is the scripted pi-compatible worker of
// examples/scriptedworker/scripted, run by re-executing this program
// ("quickstart worker …"), so nothing is built at run time. With --pi PATH
// the worker is the real pi (@mariozechner/pi-coding-agent 0.73.1), offline,
// with the bundle's faux provider: zero tokens, no network. The agent runs
// every worker under its shim, which is this program again ("quickstart
// shim …").
//
// Peers are identified by a static identity map (127.0.0.1 and ::1 are the
// machine "quickstart"), not tailscale, and the transcript says so. Every
// file lives in a temporary directory that is removed at exit (--keep keeps
// it).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"example.com/pifleet/examples/scriptedworker/scripted"
	"example.com/pifleet/internal/shim"
)

// Subcommands the program re-executes itself with. They are not meant to
// be typed: the agent runs them.
const (
	cmdShim   = "shim"
	cmdWorker = "worker"
)

func main() {
	if code, ok := reexec(os.Args[1:]); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// reexec runs the role this program was re-executed for (the shim, or the
// scripted worker), if args name one.
func reexec(args []string) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case cmdShim:
		return shim.Main(args[1:]), true
	case cmdWorker:
		return scripted.Main(args[1:], os.Stdin, os.Stdout, os.Stderr), true
	}
	return 0, false
}

// realMain parses the command line and runs the quickstart, writing the
// transcript to stdout; it returns the exit status.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.pi, "pi", "", "run the real pi at `PATH` (offline, faux provider) instead of the scripted worker")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (state, registry, sessions, workspace)")
	fs.StringVar(&o.tmp, "tmp", "", "create the temporary directory under `DIR` (default: the system's)")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "bound on each wait (spawn, each task round, stop)")
	fs.BoolVar(&o.verbose, "verbose", false, "log the fleet and the agent to stderr")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: quickstart [--pi PATH] [--keep] [--tmp DIR] [--timeout D] [--verbose]")
		fmt.Fprintln(stderr, "\nRuns a fleet server, an agent and one worker on loopback: a task, one")
		fmt.Fprintln(stderr, "rejection with feedback, the accepted revision. Flags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "quickstart: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if o.timeout <= 0 {
		fmt.Fprintln(stderr, "quickstart: --timeout must be positive")
		return 2
	}
	if o.pi != "" {
		if _, err := os.Stat(o.pi); err != nil {
			fmt.Fprintf(stderr, "quickstart: --pi: %v\n", err)
			return 2
		}
	}
	if o.verbose {
		o.logTo = stderr
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "quickstart: cannot find its own executable (needed for the shim): %v\n", err)
		return 1
	}
	o.self = exe
	if err := run(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "quickstart: FAILED: %v\n", err)
		return 1
	}
	return 0
}

// defaultTimeout bounds each wait. The real pi needs a few seconds to
// start; the scripted worker, milliseconds.
const defaultTimeout = 90 * time.Second
