// Package service writes the definitions that run a pifleet binary as a
// per-user service: a systemd user unit on Linux, a launchd agent on
// macOS. Both binaries' install commands use it, so that both services
// start at login, restart on failure, and are told how to enable in the
// same words.
package service

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// Kind is the service manager.
type Kind string

// Service managers.
const (
	Systemd Kind = "systemd"
	Launchd Kind = "launchd"
)

// Spec describes one service.
type Spec struct {
	// Name is the systemd unit's name without .service (pifleet-agent).
	Name string
	// Label is the launchd label (dev.pifleet.agent).
	Label string
	// Description is the unit's one-line description.
	Description string
	// KeepChildren leaves the service's child processes running when it
	// stops (the agent's workers outlive it and are re-adopted).
	KeepChildren bool
	// Argv is the command line: the absolute path of the binary, then its
	// arguments.
	Argv []string
}

// Path is where the definition of s goes under home.
func (s Spec) Path(k Kind, home string) string {
	if k == Launchd {
		return filepath.Join(home, "Library", "LaunchAgents", s.Label+".plist")
	}
	return filepath.Join(home, ".config", "systemd", "user", s.Name+".service")
}

// Render returns the definition of s for k.
func (s Spec) Render(k Kind) (string, error) {
	if len(s.Argv) == 0 || !filepath.IsAbs(s.Argv[0]) {
		return "", errors.New("service: the command must start with an absolute path")
	}
	tmpl := systemdUnit
	if k == Launchd {
		tmpl = launchdPlist
	}
	quoted := make([]string, len(s.Argv))
	for i, a := range s.Argv {
		quoted[i] = systemdQuote(a)
	}
	t, err := template.New(string(k)).Funcs(template.FuncMap{"xml": xmlText}).Parse(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	err = t.Execute(&b, struct {
		Spec
		Exec string
	}{s, strings.Join(quoted, " ")})
	return b.String(), err
}

// Write writes the definition of s under home and returns its path.
func (s Spec) Write(k Kind, home string) (string, error) {
	text, err := s.Render(k)
	if err != nil {
		return "", err
	}
	path := s.Path(k, home)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(text), 0o644)
}

// Install prints the definition of s (printOnly), or writes it under
// home and prints where, and what starts it.
func (s Spec) Install(k Kind, home string, printOnly bool, w io.Writer) error {
	if printOnly {
		text, err := s.Render(k)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "# %s\n%s", s.Path(k, home), text)
		return err
	}
	path, err := s.Write(k, home)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "wrote", path)
	for _, step := range s.NextSteps(k, path) {
		fmt.Fprintln(w, step)
	}
	return nil
}

// Defaults fills in an empty home (the user's) and binary (the running
// executable).
func Defaults(home, binary string) (string, string, error) {
	var err error
	if home == "" {
		if home, err = os.UserHomeDir(); err != nil {
			return "", "", err
		}
	}
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return "", "", err
		}
	}
	return home, binary, nil
}

// NextSteps are the commands that start the written service, and what
// keeps it running when its user is not logged in.
func (s Spec) NextSteps(k Kind, path string) []string {
	if k == Launchd {
		return []string{"load it with: launchctl load -w " + path}
	}
	return []string{
		fmt.Sprintf("enable it with: systemctl --user daemon-reload && systemctl --user enable --now %s", s.Name),
		fmt.Sprintf("follow its log with: journalctl --user -u %s -f", s.Name),
		"to keep it running while you are logged out (a headless machine): loginctl enable-linger $USER",
	}
}

// systemdUnit restarts the service when it fails.
const systemdUnit = `[Unit]
Description={{.Description}}
Wants=network-online.target
After=network-online.target tailscaled.service

[Service]
Type=simple
ExecStart={{.Exec}}
Restart=on-failure
RestartSec=2
{{- if .KeepChildren}}
KillMode=process
{{- end}}

[Install]
WantedBy=default.target
`

const launchdPlist = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>{{xml .Label}}</string>
	<key>ProgramArguments</key>
	<array>
{{- range .Argv}}
		<string>{{xml .}}</string>
{{- end}}
	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<dict>
		<key>SuccessfulExit</key>
		<false/>
	</dict>
{{- if .KeepChildren}}
	<key>AbandonProcessGroup</key>
	<true/>
{{- end}}
</dict>
</plist>
`

// xmlText escapes s for an XML text node.
func xmlText(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// systemdQuote quotes an ExecStart word when it needs it.
func systemdQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\$%;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `$$`, `%`, `%%`)
	return `"` + r.Replace(s) + `"`
}
