// Command pifleet-agent is the agent of pifleet: it runs on each worker
// machine, admits only the pinned server, and supervises pi workers for it.
//
//	pifleet-agent serve --server MACHINE [--listen ADDR] [--state-dir DIR] …
//	pifleet-agent doctor
//	pifleet-agent version
//	pifleet-agent install --systemd | --launchd [--print]
//
// Every flag can also be set with a PIFLEET_* environment variable; see
// --help. The hidden subcommand "shim" is the per-worker shim process the
// agent starts itself (package internal/shim); it is not for people.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/alecthomas/kong"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"example.com/pifleet/internal/shim"
)

// CLI is the whole command line.
type CLI struct {
	Globals

	Serve   ServeCmd   `cmd:"" help:"Listen for the pinned server and supervise pi workers."`
	Doctor  DoctorCmd  `cmd:"" help:"Check this machine: pi, state directory, tailscale, bundle cache."`
	Version VersionCmd `cmd:"" help:"Print the agent's version."`
	Install InstallCmd `cmd:"" help:"Install a service (systemd user unit or launchd agent) that runs the agent."`
	Shim    ShimCmd    `cmd:"" hidden:"" help:"Run a worker shim (started by the agent itself)."`
}

// Globals are the flags every command takes.
type Globals struct {
	LogLevel  string `help:"Log level: debug, info, warn or error." default:"info" enum:"debug,info,warn,error" env:"PIFLEET_LOG_LEVEL"`
	LogFormat string `help:"Log format: console, json, or auto (console on a terminal)." default:"auto" enum:"auto,console,json" env:"PIFLEET_LOG_FORMAT"`
}

// Output is where commands write results and diagnostics; tests replace
// both.
type Output struct {
	Out io.Writer
	Err io.Writer
}

func main() {
	// The shim must not go through kong: it takes no flags and its
	// descriptors 3 and 4 are pipes that nothing else may touch.
	if len(os.Args) >= 2 && os.Args[1] == "shim" {
		os.Exit(shim.Main(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], &Output{Out: os.Stdout, Err: os.Stderr}))
}

type exitRequest int

// run parses args, runs the chosen command and returns the exit status.
func run(args []string, out *Output) (status int) {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("pifleet-agent"),
		kong.Description("Run pi coding-agent workers for a pifleet server."),
		kong.UsageOnError(),
		kong.Writers(out.Out, out.Err),
		kong.Exit(func(code int) { panic(exitRequest(code)) }),
		kong.Vars{"default_state_dir": defaultStateDir()},
	)
	if err != nil {
		fmt.Fprintln(out.Err, "pifleet-agent:", err)
		return 2
	}
	defer func() {
		if r := recover(); r != nil {
			code, ok := r.(exitRequest)
			if !ok {
				panic(r)
			}
			status = int(code)
		}
	}()
	ctx, err := parser.Parse(args)
	parser.FatalIfErrorf(err)
	log := newLogger(cli.Globals, out.Err)
	if err := ctx.Run(&cli.Globals, log, out); err != nil {
		var ec exitCode
		if asExitCode(err, &ec) {
			return int(ec)
		}
		fmt.Fprintln(out.Err, "pifleet-agent:", err)
		return 1
	}
	return 0
}

// exitCode is a command's non-zero status that needs no further message
// (doctor printed its FAIL lines already).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func asExitCode(err error, ec *exitCode) bool { return errors.As(err, ec) }

// ShimCmd is reached only through kong when argv was not exactly "shim"
// (main handles that case before parsing).
type ShimCmd struct{}

// Run runs the shim.
func (ShimCmd) Run() error {
	if code := shim.Main(nil); code != 0 {
		return exitCode(code)
	}
	return nil
}

func newLogger(g Globals, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(g.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	format := g.LogFormat
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			format = "console"
		}
	}
	if format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}
