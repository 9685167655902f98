package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	s := Spec{Name: "pifleet-agent", Label: "dev.pifleet.agent", Description: "pifleet agent", KeepChildren: true,
		Argv: []string{"/usr/local/bin/pifleet-agent", "serve", "--pi", "/opt/my pi/bin/pi", "--exec-roots", "a&b<c"}}
	unit, err := s.Render(Systemd)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Description=pifleet agent\n", `ExecStart=/usr/local/bin/pifleet-agent serve --pi "/opt/my pi/bin/pi" --exec-roots a&b<c` + "\n",
		"Restart=on-failure\n", "KillMode=process\n", "WantedBy=default.target\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	plist, err := s.Render(Launchd)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<string>dev.pifleet.agent</string>", "<string>/opt/my pi/bin/pi</string>", "<string>a&amp;b&lt;c</string>",
		"<key>AbandonProcessGroup</key>"} {
		if !strings.Contains(plist, want) {
			t.Errorf("plist lacks %q:\n%s", want, plist)
		}
	}
	s.KeepChildren = false
	if unit, _ := s.Render(Systemd); strings.Contains(unit, "KillMode") {
		t.Errorf("a service without children to keep has KillMode:\n%s", unit)
	}
	s.Argv[0] = "pifleet-agent"
	if _, err := s.Render(Systemd); err == nil {
		t.Error("a relative binary was accepted")
	}
}

func TestWriteAndNextSteps(t *testing.T) {
	home := t.TempDir()
	s := Spec{Name: "pifleet-server", Label: "dev.pifleet.server", Description: "d", Argv: []string{"/bin/pifleet-server", "serve"}}
	path, err := s.Write(Systemd, home)
	if err != nil || path != filepath.Join(home, ".config/systemd/user/pifleet-server.service") {
		t.Fatalf("Write = %s, %v", path, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if steps := strings.Join(s.NextSteps(Systemd, path), "\n"); !strings.Contains(steps, "loginctl enable-linger") ||
		!strings.Contains(steps, "systemctl --user enable --now pifleet-server") {
		t.Errorf("next steps: %s", steps)
	}
	if p := s.Path(Launchd, home); p != filepath.Join(home, "Library/LaunchAgents/dev.pifleet.server.plist") {
		t.Errorf("launchd path %s", p)
	}
}
