package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/cli"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if len(args) > 0 && args[0] == "install" {
		fakePiOnPath(t)
	}
	var out, errb bytes.Buffer
	code := run(args, &Output{Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// Checklist 2.14 item 134: the systemd unit's path and content.
func TestInstallSystemd_134(t *testing.T) {
	home := t.TempDir()
	code, out, errs := runCLI(t, "install", "--systemd", "--print", "--server", "orchestrator", "--server-key", testKey, "--home", home, "--binary", "/usr/local/bin/pifleet-agent")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		filepath.Join(home, ".config/systemd/user/pifleet-agent.service"),
		"ExecStart=/usr/local/bin/pifleet-agent serve --server orchestrator --port 9788",
		"--server-key " + testKey,
		"Restart=on-failure",
		"After=network-online.target tailscaled.service",
		"KillMode=process",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("unit lacks %q:\n%s", want, out)
		}
	}
	// without --print it is written there
	if code, _, errs := runCLI(t, "install", "--systemd", "--server", "orchestrator", "--trust-first-server-key", "--home", home); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(home, ".config/systemd/user/pifleet-agent.service")); err != nil {
		t.Fatal(err)
	}
}

// Item 135: the launchd plist's path, RunAtLoad, KeepAlive on failure and
// the server name as an argument.
func TestInstallLaunchd_135(t *testing.T) {
	home := t.TempDir()
	code, out, errs := runCLI(t, "install", "--launchd", "--print", "--server", "orchestrator", "--allow-v1-server", "--home", home)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		filepath.Join(home, "Library/LaunchAgents/dev.pifleet.agent.plist"),
		"<key>RunAtLoad</key>\n\t<true/>",
		"<key>SuccessfulExit</key>\n\t\t<false/>",
		"<string>--server</string>\n\t\t<string>orchestrator</string>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plist lacks %q:\n%s", want, out)
		}
	}
}

// testKey is a well-formed server key.
const testKey = "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// An agent installed without a server key would refuse to start: install
// refuses too, naming the flags; a bad key is named.
func TestInstallNeedsServerKey(t *testing.T) {
	code, _, errs := runCLI(t, "install", "--systemd", "--print", "--server", "orchestrator", "--home", t.TempDir())
	if code == 0 || !strings.Contains(errs, "--server-key") || !strings.Contains(errs, "--allow-v1-server") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, _, errs = runCLI(t, "install", "--systemd", "--print", "--server", "orchestrator", "--server-key", "ed25519:short", "--home", t.TempDir())
	if code == 0 || !strings.Contains(errs, "ed25519:short") {
		t.Fatalf("bad key: exit %d: %s", code, errs)
	}
}

func TestInstallNeedsAKind(t *testing.T) {
	if code, _, _ := runCLI(t, "install", "--server", "x"); code == 0 {
		t.Fatal("install without --systemd or --launchd succeeded")
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runCLI(t, args...)
		if code != 0 || !strings.HasPrefix(out, "pifleet-agent "+cli.VersionString()) {
			t.Errorf("%v: exit %d: %q", args, code, out)
		}
	}
}

// doctor prints one line per check and fails when one fails.
func TestDoctor(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700) // as the agent creates it
	code, out, _ := runCLI(t, "doctor", "--state-dir", dir, "--pi", "/nonexistent/pi", "--whois-static", "127.0.0.1=x")
	if code == 0 {
		t.Fatalf("doctor passed with no pi:\n%s", out)
	}
	for _, want := range []string{"FAIL pi", "PASS state dir", "SKIP tailscale", "PASS bundle cache"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "FAIL server key") {
		t.Errorf("no server key is not reported:\n%s", out)
	}
	fake := filepath.Join(t.TempDir(), "pi")
	os.WriteFile(fake, []byte("#!/bin/sh\necho 0.73.1\n"), 0o755)
	code, out, _ = runCLI(t, "doctor", "--state-dir", dir, "--pi", fake, "--whois-static", "127.0.0.1=x", "--server-key", testKey)
	if code != 0 || !strings.Contains(out, "PASS pi") || !strings.Contains(out, "0.73.1") || !strings.Contains(out, "PASS server key") ||
		!strings.Contains(out, "PASS permissions") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// doctor warns loudly about --allow-v1-server (without failing) and fails
// on a state directory or key file other users can read.
func TestDoctorSecurity(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	fake := filepath.Join(t.TempDir(), "pi")
	os.WriteFile(fake, []byte("#!/bin/sh\necho 0.73.1\n"), 0o755)
	args := []string{"doctor", "--state-dir", dir, "--pi", fake, "--whois-static", "127.0.0.1=x"}
	code, out, _ := runCLI(t, append(args, "--allow-v1-server")...)
	if code != 0 || !strings.Contains(out, "WARN server key") || !strings.Contains(out, "WITHOUT A KEY PROOF") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	os.WriteFile(filepath.Join(dir, agent.AgentKeyFile), []byte("x"), 0o644)
	os.Chmod(dir, 0o755)
	code, out, _ = runCLI(t, append(args, "--server-key", testKey)...)
	if code == 0 || !strings.Contains(out, "FAIL permissions") || !strings.Contains(out, "agent.key is 0644") || !strings.Contains(out, "is 0755") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// A --dial address must be the pinned server, by whois alone.
	code, out, _ = runCLI(t, "doctor", "--state-dir", dir, "--pi", fake, "--whois-static", "127.0.0.1=box,127.0.0.2=other",
		"--server", "box", "--dial", "127.0.0.1:9790,127.0.0.2:9790")
	if code == 0 || !strings.Contains(out, "PASS dial 127.0.0.1:9790 127.0.0.1 is box, the pinned server") ||
		!strings.Contains(out, "FAIL dial 127.0.0.2:9790 127.0.0.2 is other, not the pinned server box") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// Checklist 136: the exec flags are kept in the service's command line, in
// the reference's order; with exec off there are none.
func TestInstallKeepsExecFlags_136(t *testing.T) {
	code, out, errs := runCLI(t, "install", "--systemd", "--print", "--server", "orchestrator", "--server-key", testKey, "--home", t.TempDir(),
		"--binary", "/b", "--exec-policy", "full", "--exec-root", "/", "--max-execs", "6", "--exec-timeout", "900")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, " --exec-policy full --exec-root / --max-execs 6 --exec-timeout 900") {
		t.Errorf("unit:\n%s", out)
	}
	code, out, _ = runCLI(t, "install", "--systemd", "--print", "--server", "orchestrator", "--server-key", testKey, "--home", t.TempDir(), "--binary", "/b")
	if code != 0 || strings.Contains(out, "--exec") {
		t.Errorf("exec off, unit:\n%s", out)
	}
}

// serve refuses a bad pin, and says loudly when a static map is in force.
func TestServeConfig(t *testing.T) {
	var out, errb bytes.Buffer
	c := &ServeCmd{Server: "orchestrator", Port: 9788, WhoisStatic: []string{"127.0.0.1=orchestrator"}, StateDir: t.TempDir(), Pi: "pi", FsAccess: "workspace",
		KeyFlags: KeyFlags{ServerKey: []string{testKey}}}
	cfg, err := c.config(cli.NewLogger(Globals{LogLevel: "error", LogFormat: "json"}, &errb), &Output{Out: &out, Err: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "STATIC IDENTITY MAP IN FORCE") {
		t.Errorf("no loud warning: %q", errb.String())
	}
	if cfg.Pin.Machine != "orchestrator" || len(cfg.ShimCommand) != 2 || cfg.ShimCommand[1] != "shim" || len(cfg.ServerKeys) != 1 {
		t.Errorf("config %+v", cfg)
	}
	c.ExecFlags = ExecFlags{ExecPolicy: "full", ExecRoot: []string{"/srv"}, MaxExecs: 2, ExecTimeout: 60}
	cfg, err = c.config(cli.NewLogger(Globals{LogLevel: "error", LogFormat: "json"}, &errb), &Output{Out: &out, Err: &errb})
	if err != nil || cfg.ExecPolicy != agent.ExecFull || cfg.ExecRoots[0] != "/srv" || cfg.MaxExecs != 2 || cfg.ExecTimeout != time.Minute {
		t.Errorf("exec config %+v %v", cfg, err)
	}
	if strings.Contains(errb.String(), "WITHOUT A KEY PROOF") {
		t.Errorf("v1 warning without --allow-v1-server: %q", errb.String())
	}
	c.AllowV1Server = true
	errb.Reset()
	if _, err := c.config(cli.NewLogger(Globals{LogLevel: "error", LogFormat: "json"}, &errb), &Output{Out: &out, Err: &errb}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "SERVERS WITHOUT A KEY PROOF ARE ACCEPTED (--allow-v1-server)") {
		t.Errorf("no loud v1 warning: %q", errb.String())
	}
	c.AllowV1Server = false
	c.ServerKey = []string{"ed25519:nope"}
	if _, err := c.config(cli.NewLogger(Globals{}, &errb), &Output{Out: &out, Err: &errb}); err == nil || !strings.Contains(err.Error(), "--server-key") {
		t.Errorf("bad key: %v", err)
	}
	c.ServerKey = []string{testKey}
	c.Server = "bad pin"
	if _, err := c.config(cli.NewLogger(Globals{}, &errb), &Output{Out: &out, Err: &errb}); err == nil {
		t.Error("a pin with a space was accepted")
	}
	c.Server = "orchestrator"
	c.Dial, c.DialFrom = []string{"100.64.0.1:9790", "100.64.0.2:9790"}, "127.0.0.2"
	if cfg, err = c.config(cli.NewLogger(Globals{}, &errb), &Output{Out: &out, Err: &errb}); err != nil ||
		len(cfg.Dial) != 2 || cfg.Dial[1] != "100.64.0.2:9790" || cfg.DialFrom.String() != "127.0.0.2" {
		t.Errorf("--dial: %+v, %v", cfg, err)
	}
	c.DialFrom = "box"
	if _, err := c.config(cli.NewLogger(Globals{}, &errb), &Output{Out: &out, Err: &errb}); err == nil || !strings.Contains(err.Error(), "--dial-from") {
		t.Errorf("--dial-from box: %v", err)
	}
	if _, err := parseModelFlag("faux/faux-1:high"); err != nil {
		t.Error(err)
	}
	if _, err := parseModelFlag("nope"); err == nil {
		t.Error("bad --model accepted")
	}
}

func TestServePeerQueueAndConnectionCap(t *testing.T) {
	var out, errb bytes.Buffer
	c := &ServeCmd{Server: "orchestrator", Port: 9788, WhoisStatic: []string{"127.0.0.1=orchestrator"}, StateDir: t.TempDir(), Pi: "pi", FsAccess: "workspace",
		KeyFlags: KeyFlags{ServerKey: []string{testKey}}, PeerQueue: "4M", MaxConnsPerIdentity: 3}
	cfg, err := c.config(cli.NewLogger(Globals{LogLevel: "error", LogFormat: "json"}, &errb), &Output{Out: &out, Err: &errb})
	if err != nil || cfg.PeerQueueBytes != 4<<20 || cfg.MaxConnsPerIdentity != 3 {
		t.Fatalf("config %d %d %v", cfg.PeerQueueBytes, cfg.MaxConnsPerIdentity, err)
	}
	c.PeerQueue = "lots"
	if _, err := c.config(cli.NewLogger(Globals{}, &errb), &Output{Out: &out, Err: &errb}); err == nil || !strings.Contains(err.Error(), "--peer-queue") {
		t.Errorf("--peer-queue lots: %v", err)
	}
	for in, want := range map[string]int{"65536": 65536, "64K": 64 << 10, "16m": 16 << 20, "1G": 1 << 30} {
		if n, err := parseBytes(in); err != nil || n != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1K", "M", "1.5M", "99999999999999999999G"} {
		if n, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, n)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"16M", "1", "0", "-3", "9223372036854775807", "8G", "k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseBytes(s); err == nil && n <= 0 {
			t.Fatalf("%q accepted as %d", s, n)
		}
	})
}

// PIFLEET_DIAL is a comma-separated list, --dial repeats; install carries
// them into the service's command line.
func TestDialFlagAndVariable(t *testing.T) {
	t.Setenv("PIFLEET_DIAL", "100.64.0.1:9790,100.64.0.2:9790")
	t.Setenv("PIFLEET_SERVER_KEY", testKey+","+testKey)
	code, out, errs := runCLI(t, "install", "--systemd", "--print", "--server", "orchestrator", "--home", t.TempDir(), "--binary", "/bin/pa")
	if code != 0 || !strings.Contains(out, "--dial 100.64.0.1:9790 --dial 100.64.0.2:9790") ||
		!strings.Contains(out, "--server-key "+testKey+" --server-key "+testKey) {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
}

func FuzzParseModelFlag(f *testing.F) {
	for _, s := range []string{"faux/faux-1", "a/b:high", "", ":", "/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseModelFlag(s)
		if err == nil && (m.Provider == "" || m.ID == "") {
			t.Fatalf("%q accepted as %+v", s, m)
		}
	})
}

// fakePiOnPath puts an executable named pi first on PATH and returns it.
func fakePiOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	pi := filepath.Join(dir, "pi")
	if err := os.WriteFile(pi, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	// PIFLEET_PI is --pi's variable, and the real-pi test runs export it:
	// hidden here, so that install looks pi up on PATH.
	t.Setenv("PIFLEET_PI", "")
	os.Unsetenv("PIFLEET_PI")
	return pi
}

// install names pi by its absolute path (a service has no shell PATH),
// writes any other serve flag given after -- once serve accepts it, and
// says how to keep the service up while logged out.
func TestInstallResolvesPiAndPassesServeFlags(t *testing.T) {
	home := t.TempDir()
	code, out, errs := runCLI(t, "install", "--systemd", "--server", "orchestrator", "--server-key", testKey, "--home", home,
		"--binary", "/usr/local/bin/pifleet-agent", "--", "--max-execs", "2", "--pi-arg=--offline")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "loginctl enable-linger") {
		t.Errorf("no word of lingering:\n%s", out)
	}
	unit, err := os.ReadFile(filepath.Join(home, ".config/systemd/user/pifleet-agent.service"))
	if err != nil {
		t.Fatal(err)
	}
	pi, _ := exec.LookPath("pi")
	for _, want := range []string{"--pi " + pi + " ", " --max-execs 2 --pi-arg=--offline\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	if code, _, errs := runCLI(t, "install", "--systemd", "--print", "--server", "orchestrator", "--server-key", testKey, "--home", home,
		"--", "--no-such-flag"); code == 0 || !strings.Contains(errs, "no-such-flag") {
		t.Errorf("a serve flag that does not exist: exit %d, %s", code, errs)
	}
	if code, _, errs := runCLI(t, "install", "--systemd", "--print", "--server", "orchestrator", "--server-key", testKey, "--home", home,
		"--pi", "no-such-pi-anywhere"); code == 0 || !strings.Contains(errs, "no-such-pi-anywhere") {
		t.Errorf("a pi that is not there: exit %d, %s", code, errs)
	}
}
