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
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// Globals are the flags every command of both binaries takes.
type Globals struct {
	LogLevel  string           `help:"Log level: debug, info, warn or error." default:"info" enum:"debug,info,warn,error" env:"PIFLEET_LOG_LEVEL"`
	LogFormat string           `help:"Log format: console, json, or auto (console on a terminal)." default:"auto" enum:"auto,console,json" env:"PIFLEET_LOG_FORMAT"`
	Version   kong.VersionFlag `help:"Print the version and exit."`
}

// UsageStatus is the exit status of a command line that does not parse
// (an unknown command or flag, a missing argument, a bad value), and of a
// command that found its arguments wrong (UsageError).
const UsageStatus = 2

// UsageError is a command's complaint about its arguments: Run prints it
// like a parse error (one line, then where to find help) and exits with
// UsageStatus.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
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
		kong.Vars{"version": name + " " + VersionString()},
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
	if err != nil {
		return usage(out, name, commandOf(err), err.Error())
	}
	log := NewLogger(*globals, out.Err)
	if err := ctx.Run(globals, log, out); err != nil {
		var code ExitCode
		if errors.As(err, &code) {
			return int(code)
		}
		var ue *UsageError
		if errors.As(err, &ue) {
			return usage(out, name, ctx.Command(), ue.Msg)
		}
		fmt.Fprintf(out.Err, "%s: error: %v\n", name, err)
		return 1
	}
	return 0
}

// usage prints a usage error as one line and the way to the help of the
// command it is about, and returns UsageStatus.
func usage(out *Output, name, command, msg string) int {
	help := name + " --help"
	if command = strings.TrimSpace(stripArgs(command)); command != "" {
		help = name + " " + command + " --help"
	}
	fmt.Fprintf(out.Err, "%s: error: %s\nRun '%s' for usage.\n", name, msg, help)
	return UsageStatus
}

// commandOf is the command a parse error is about, as far as kong got.
func commandOf(err error) string {
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil {
		return pe.Context.Command()
	}
	return ""
}

// stripArgs turns kong's "trust set <machine> <policy>" into "trust set".
func stripArgs(command string) string {
	var words []string
	for _, w := range strings.Fields(command) {
		if strings.HasPrefix(w, "<") {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
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
