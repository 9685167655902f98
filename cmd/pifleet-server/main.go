// Command pifleet-server is the orchestrator side of pifleet: it publishes
// bundles into a registry directory and (in later versions) serves them and
// drives agents.
//
//	pifleet-server bundle publish --registry DIR --name NAME SRC
//	pifleet-server bundle list --registry DIR
//	pifleet-server bundle show --registry DIR NAME
//
// Every flag can also be set with a PIFLEET_* environment variable; see
// --help.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/alecthomas/kong"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// CLI is the whole command line. A command is a field: adding one is adding
// a struct (with a Run method) in its own file and a field here.
type CLI struct {
	Globals

	Bundle BundleCmd `cmd:"" help:"Publish and inspect bundles in a registry directory."`
}

// Globals are the flags every command takes.
type Globals struct {
	LogLevel  string `help:"Log level: debug, info, warn or error." default:"info" enum:"debug,info,warn,error" env:"PIFLEET_LOG_LEVEL"`
	LogFormat string `help:"Log format: console, json, or auto (console on a terminal)." default:"auto" enum:"auto,console,json" env:"PIFLEET_LOG_FORMAT"`
}

// Output is where commands write their results (standard output) and
// diagnostics (standard error); tests replace both.
type Output struct {
	Out io.Writer
	Err io.Writer
}

func main() {
	os.Exit(run(os.Args[1:], &Output{Out: os.Stdout, Err: os.Stderr}))
}

// exitRequest carries kong's exit code (after --help, or a parse error)
// out of the parser without ending the process, so run can be tested.
type exitRequest int

// run parses args, runs the chosen command and returns the exit status.
func run(args []string, out *Output) (status int) {
	var cli CLI
	parser, err := kong.New(&cli,
		kong.Name("pifleet-server"),
		kong.Description("Orchestrate fleets of pi coding-agent workers."),
		kong.UsageOnError(),
		kong.Writers(out.Out, out.Err),
		kong.Exit(func(code int) { panic(exitRequest(code)) }),
		kong.Vars{"default_registry": defaultRegistry()},
	)
	if err != nil {
		fmt.Fprintln(out.Err, "pifleet-server:", err)
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
		parser.Errorf("%s", err)
		return 1
	}
	return 0
}

// defaultRegistry is the registry root of the TypeScript server, so both
// can publish into and serve the same directory.
func defaultRegistry() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".pi", "agent", "fleet", "bundles")
	}
	return filepath.Join(home, ".pi", "agent", "fleet", "bundles")
}

// newLogger writes human-readable lines to a terminal and JSON otherwise.
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
