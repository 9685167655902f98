package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
)

// InstallCmd writes a service definition that starts the agent at login
// and restarts it when it fails (checklist 2.14 items 134–135).
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
}

// Run writes or prints the definition.
func (c *InstallCmd) Run(out *Output) error {
	home := c.Home
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return err
		}
		home = h
	}
	bin := c.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		bin = exe
	}
	// An agent that would refuse to start is not installed.
	if _, err := c.KeyFlags.keys(); err != nil {
		return err
	}
	args := c.serveArgs()
	var (
		path string
		text string
		err  error
	)
	switch {
	case c.Systemd:
		path = filepath.Join(home, ".config", "systemd", "user", "pifleet-agent.service")
		text, err = render(systemdUnit, bin, args)
	case c.Launchd:
		path = filepath.Join(home, "Library", "LaunchAgents", "dev.pifleet.agent.plist")
		text, err = render(launchdPlist, bin, args)
	default:
		return errors.New("choose --systemd or --launchd")
	}
	if err != nil {
		return err
	}
	if c.Print {
		fmt.Fprintf(out.Out, "# %s\n%s", path, text)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Fprintln(out.Out, "wrote", path)
	if c.Systemd {
		fmt.Fprintln(out.Out, "enable it with: systemctl --user daemon-reload && systemctl --user enable --now pifleet-agent")
	} else {
		fmt.Fprintln(out.Out, "load it with: launchctl load -w", path)
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
	return append(args, c.ExecFlags.args()...)
}

// systemdUnit restarts the agent when it fails. KillMode=process: stopping
// the agent must not kill the workers' shims in its cgroup (they outlive
// the agent and the next one re-adopts them).
const systemdUnit = `[Unit]
Description=pifleet agent (pi coding-agent workers for a pifleet server)
Wants=network-online.target
After=network-online.target tailscaled.service

[Service]
Type=simple
ExecStart={{.Exec}}
Restart=on-failure
RestartSec=2
KillMode=process

[Install]
WantedBy=default.target
`

const launchdPlist = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>dev.pifleet.agent</string>
	<key>ProgramArguments</key>
	<array>
{{- range .Argv}}
		<string>{{.}}</string>
{{- end}}
	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
	<key>AbandonProcessGroup</key>
	<true/>
</dict>
</plist>
`

func render(tmpl, bin string, args []string) (string, error) {
	argv := append([]string{bin}, args...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = systemdQuote(a)
	}
	t, err := template.New("unit").Parse(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = t.Execute(&b, struct {
		Exec string
		Argv []string
	}{strings.Join(quoted, " "), argv})
	return b.String(), err
}

// systemdQuote quotes an ExecStart word when it needs it.
func systemdQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}
