// Command pifleet-agent is the agent of pifleet: it runs on each worker
// machine, admits only the pinned server, and supervises pi workers for it.
//
//	pifleet-agent serve --server MACHINE [--listen ADDR] [--dial HOST:PORT] [--state-dir DIR] …
//	pifleet-agent doctor
//	pifleet-agent version
//	pifleet-agent install --systemd | --launchd [--print]
//
// Every flag can also be set with a PIFLEET_* environment variable; see
// --help. The hidden subcommand "shim" is the per-worker shim process the
// agent starts itself (package internal/shim); it is not for people.
package main

import (
	"os"

	"github.com/alecthomas/kong"

	"example.com/pifleet/internal/cli"
	"example.com/pifleet/internal/shim"
)

// CLI is the whole command line.
type CLI struct {
	Globals

	Serve      ServeCmd          `cmd:"" help:"Listen for (and optionally dial) the pinned server, and supervise pi workers."`
	Doctor     DoctorCmd         `cmd:"" help:"Check this machine: pi, state directory, tailscale, bundle cache."`
	Version    cli.VersionCmd    `cmd:"" help:"Print the version: module version, VCS revision, Go version, platform."`
	Completion cli.CompletionCmd `cmd:"" help:"Print a shell completion script: bash, zsh or fish."`
	Install    InstallCmd        `cmd:"" help:"Install a service (systemd user unit or launchd agent) that runs the agent."`
	Shim       ShimCmd           `cmd:"" hidden:"" help:"Run a worker shim (started by the agent itself)."`
}

// Globals and Output are the shared CLI plumbing (internal/cli).
type (
	Globals = cli.Globals
	Output  = cli.Output
)

func main() {
	// The shim must not go through kong: it takes no flags and its
	// descriptors 3 and 4 are pipes that nothing else may touch.
	if len(os.Args) >= 2 && os.Args[1] == "shim" {
		os.Exit(shim.Main(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], cli.Std()))
}

// run parses args, runs the chosen command and returns the exit status.
func run(args []string, out *Output) int {
	var c CLI
	return cli.Run("pifleet-agent", "Run pi coding-agent workers for a pifleet server.", &c, &c.Globals, args, out,
		kong.Vars{"default_state_dir": defaultStateDir()})
}

// ShimCmd is reached only through kong when argv was not exactly "shim"
// (main handles that case before parsing).
type ShimCmd struct{}

// Run runs the shim.
func (ShimCmd) Run() error {
	if code := shim.Main(nil); code != 0 {
		return cli.ExitCode(code)
	}
	return nil
}
