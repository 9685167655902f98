package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/alecthomas/kong"

	"example.com/pifleet/internal/service"
)

// InstallCmd writes a service definition that starts the agent at login
// and restarts it when it fails.
type InstallCmd struct {
	Systemd bool `help:"Write a systemd user unit (~/.config/systemd/user/pifleet-agent.service)." xor:"kind" required:"" env:"PIFLEET_INSTALL_SYSTEMD"`
	Launchd bool `help:"Write a launchd agent (~/Library/LaunchAgents/dev.pifleet.agent.plist)." xor:"kind" required:"" env:"PIFLEET_INSTALL_LAUNCHD"`
	Print   bool `help:"Print the definition to standard output instead of writing it." env:"PIFLEET_INSTALL_PRINT"`

	Server     string   `help:"The pinned server's machine name." required:"" env:"PIFLEET_SERVER"`
	Port       int      `help:"Port on the tailscale address." default:"9788" env:"PIFLEET_PORT"`
	Listen     string   `help:"Explicit listen address (default: tailscale IPv4 on --port)." env:"PIFLEET_AGENT_LISTEN"`
	Dial       []string `help:"A server address to keep a connection to (its --inbound). Repeatable." env:"PIFLEET_DIAL" sep:"," placeholder:"HOST:PORT"`
	StateDir   string   `help:"State directory." default:"${default_state_dir}" env:"PIFLEET_AGENT_STATE_DIR" type:"path"`
	Pi         string   `help:"The pi executable." default:"pi" env:"PIFLEET_PI"`
	Registry   string   `help:"Bundle registry URL." env:"PIFLEET_REGISTRY_URL"`
	MaxWorkers int      `help:"Maximum running workers (0: no limit)." default:"0" env:"PIFLEET_MAX_WORKERS"`
	FsAccess   string   `help:"workspace or off." default:"workspace" enum:"workspace,off" env:"PIFLEET_FS_ACCESS"`
	Home       string   `help:"Home directory the definition is written under (default: yours)." type:"path" env:"PIFLEET_INSTALL_HOME"`
	Binary     string   `help:"The agent binary the service runs (default: this one)." type:"path" env:"PIFLEET_INSTALL_BINARY"`

	KeyFlags  `embed:""`
	ExecFlags `embed:""`

	Serve []string `arg:"" optional:"" passthrough:"" help:"Any other serve flags, after --: they are checked and written into the service as they are (e.g. -- --max-execs 2 --pi-args=--offline)." placeholder:"-- SERVE-FLAGS"`
}

// Run writes or prints the definition.
func (c *InstallCmd) Run(out *Output) error {
	home, bin, err := service.Defaults(c.Home, c.Binary)
	if err != nil {
		return err
	}
	// A service does not run with the user's shell PATH: pi is named by
	// its absolute path.
	pi, err := exec.LookPath(c.Pi)
	if err != nil {
		return fmt.Errorf("--pi %s: %w (install pi, or give its path)", c.Pi, err)
	}
	if pi, err = filepath.Abs(pi); err != nil {
		return err
	}
	c.Pi = pi
	// An agent that would refuse to start is not installed.
	if _, err := c.KeyFlags.keys(); err != nil {
		return err
	}
	args := c.serveArgs()
	if err := checkServeArgs(args); err != nil {
		return err
	}
	kind := service.Systemd
	if c.Launchd {
		kind = service.Launchd
	}
	spec := service.Spec{Name: "pifleet-agent", Label: "dev.pifleet.agent",
		Description: "pifleet agent (pi coding-agent workers for a pifleet server)",
		// Stopping the agent must not kill the workers' shims: they
		// outlive it and the next agent re-adopts them.
		KeepChildren: true, Argv: append([]string{bin}, args...)}
	return spec.Install(kind, home, c.Print, out.Out)
}

// checkServeArgs parses the service's command line as serve would, so that
// a service that would not start is not installed.
func checkServeArgs(args []string) error {
	var c CLI
	parser, err := kong.New(&c, kong.Vars{"default_state_dir": defaultStateDir()}, kong.Exit(func(int) {}))
	if err != nil {
		return err
	}
	if _, err := parser.Parse(args); err != nil {
		return fmt.Errorf("the service's command line would not start: %w", err)
	}
	return nil
}

// serveArgs are the serve flags persisted in the service, in a fixed order.
func (c *InstallCmd) serveArgs() []string {
	args := []string{"serve", "--server", c.Server, "--port", strconv.Itoa(c.Port), "--state-dir", c.StateDir, "--pi", c.Pi}
	args = append(args, c.KeyFlags.args()...)
	if c.Listen != "" {
		args = append(args, "--listen", c.Listen)
	}
	for _, addr := range c.Dial {
		args = append(args, "--dial", addr)
	}
	if c.Registry != "" {
		args = append(args, "--registry", c.Registry)
	}
	if c.MaxWorkers > 0 {
		args = append(args, "--max-workers", strconv.Itoa(c.MaxWorkers))
	}
	if c.FsAccess != "" {
		args = append(args, "--fs-access", c.FsAccess)
	}
	args = append(args, c.ExecFlags.args()...)
	extra := c.Serve
	if len(extra) > 0 && extra[0] == "--" {
		extra = extra[1:]
	}
	return append(args, extra...)
}
