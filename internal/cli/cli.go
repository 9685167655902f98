// Package cli is the plumbing both pifleet binaries share: the global
// logging flags, where output goes, and one Run that parses the command
// line with kong, builds the logger and runs the chosen command, so that
// pifleet-agent and pifleet-server behave the same way on --help, on a
// parse error and on a failing command.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/alecthomas/kong"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Globals are the flags every command of both binaries takes.
type Globals struct {
	LogLevel  string `help:"Log level: debug, info, warn or error." default:"info" enum:"debug,info,warn,error" env:"PIFLEET_LOG_LEVEL"`
	LogFormat string `help:"Log format: console, json, or auto (console on a terminal)." default:"auto" enum:"auto,console,json" env:"PIFLEET_LOG_FORMAT"`
}

// Output is where commands write their results (Out, standard output) and
// diagnostics (Err, standard error); tests replace both.
type Output struct {
	Out io.Writer
	Err io.Writer
}

// Std is the process's own standard output and error.
func Std() *Output { return &Output{Out: os.Stdout, Err: os.Stderr} }

// ExitCode is a command's non-zero exit status that needs no further
// message (the command printed its own diagnosis, as doctor does).
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitRequest carries kong's exit code (after --help, or a parse error)
// out of the parser without ending the process, so Run can be tested.
type exitRequest int

// Run parses args into grammar (a struct embedding Globals, reachable
// through globals), runs the chosen command with the bindings
// (*Globals, zerolog.Logger, *Output), and returns the exit status:
// 0, the command's ExitCode, 1 for another error (printed as
// "NAME: error"), or kong's status for --help and parse errors.
func Run(name, description string, grammar any, globals *Globals, args []string, out *Output, options ...kong.Option) (status int) {
	options = append([]kong.Option{
		kong.Name(name),
		kong.Description(description),
		kong.UsageOnError(),
		kong.Writers(out.Out, out.Err),
		kong.Exit(func(code int) { panic(exitRequest(code)) }),
	}, options...)
	parser, err := kong.New(grammar, options...)
	if err != nil {
		fmt.Fprintf(out.Err, "%s: %v\n", name, err)
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
	log := NewLogger(*globals, out.Err)
	if err := ctx.Run(globals, log, out); err != nil {
		var code ExitCode
		if errors.As(err, &code) {
			return int(code)
		}
		fmt.Fprintf(out.Err, "%s: error: %v\n", name, err)
		return 1
	}
	return 0
}

// NewLogger writes human-readable lines to a terminal and JSON otherwise
// (or as LogFormat says), at LogLevel.
func NewLogger(g Globals, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(g.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	format := g.LogFormat
	if format == "auto" || format == "" {
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
