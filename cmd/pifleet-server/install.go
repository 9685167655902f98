package main

import (
	"fmt"

	"github.com/alecthomas/kong"

	"example.com/pifleet/internal/service"
)

// InstallCmd writes a service definition that runs serve at login and
// restarts it when it fails, as pifleet-agent install does for the agent.
type InstallCmd struct {
	Systemd bool   `help:"Write a systemd user unit (~/.config/systemd/user/pifleet-server.service)." xor:"kind" required:"" env:"PIFLEET_INSTALL_SYSTEMD"`
	Launchd bool   `help:"Write a launchd agent (~/Library/LaunchAgents/dev.pifleet.server.plist)." xor:"kind" required:"" env:"PIFLEET_INSTALL_LAUNCHD"`
	Print   bool   `help:"Print the definition to standard output instead of writing it." env:"PIFLEET_INSTALL_PRINT"`
	Home    string `help:"Home directory the definition is written under (default: yours)." type:"path" env:"PIFLEET_INSTALL_HOME"`
	Binary  string `help:"The server binary the service runs (default: this one)." type:"path" env:"PIFLEET_INSTALL_BINARY"`

	Serve []string `arg:"" optional:"" passthrough:"" help:"The serve flags, after --: checked, then written into the service as they are (e.g. -- --agent buildbox=100.64.0.7:9788 --trust buildbox=steer)." placeholder:"-- SERVE-FLAGS"`
}

// Run writes or prints the definition.
func (c *InstallCmd) Run(out *Output) error {
	home, bin, err := service.Defaults(c.Home, c.Binary)
	if err != nil {
		return err
	}
	flags := c.Serve
	if len(flags) > 0 && flags[0] == "--" {
		flags = flags[1:]
	}
	args := append([]string{"serve"}, flags...)
	if err := checkServeArgs(args); err != nil {
		return err
	}
	kind := service.Systemd
	if c.Launchd {
		kind = service.Launchd
	}
	spec := service.Spec{Name: "pifleet-server", Label: "dev.pifleet.server",
		Description: "pifleet server (orchestrates pi coding-agent workers)", Argv: append([]string{bin}, args...)}
	if err := spec.Install(kind, home, c.Print, out.Out); err != nil || c.Print {
		return err
	}
	fmt.Fprintln(out.Out, "a service has no terminal to ask about first contact: admit agents with --trust NAME=POLICY or pifleet-server trust set")
	return nil
}

// checkServeArgs parses the service's command line as serve would, so that
// a service that would not start is not installed.
func checkServeArgs(args []string) error {
	var c CLI
	parser, err := kong.New(&c, kong.Vars{"default_registry": defaultRegistry()}, kong.Vars(apiVars(stateDirFromEnv())),
		kong.Exit(func(int) {}))
	if err != nil {
		return err
	}
	if _, err := parser.Parse(args); err != nil {
		return fmt.Errorf("the service's command line would not start: %w", err)
	}
	return nil
}
