package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/internal/cli"
	"example.com/pifleet/internal/fileperm"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// DoctorCmd checks what the agent needs, one PASS/FAIL line per check, and
// exits non-zero when anything failed.
type DoctorCmd struct {
	StateDir    string        `help:"State directory to check." default:"${default_state_dir}" env:"PIFLEET_AGENT_STATE_DIR" type:"path"`
	Pi          string        `help:"The pi executable." default:"pi" env:"PIFLEET_PI"`
	WhoisStatic []string      `help:"A static identity map is configured: the tailscale check is skipped (SKIP)." env:"PIFLEET_WHOIS_STATIC" sep:","`
	Tailscale   string        `help:"The tailscale CLI (default: looked up)." env:"PIFLEET_TAILSCALE"`
	Timeout     time.Duration `help:"Timeout of each check." default:"20s" env:"PIFLEET_DOCTOR_TIMEOUT"`
	Server      string        `help:"The pinned server (as serve's --server): each --dial address is checked to be it." env:"PIFLEET_SERVER"`
	Dial        []string      `help:"A server address serve dials (as serve's --dial): whois must name the pinned server. Nothing is sent to it." env:"PIFLEET_DIAL" sep:"," placeholder:"HOST:PORT"`

	KeyFlags `embed:""` // as serve is given them: reported
}

// check is one line of the report.
type check struct {
	name string
	run  func(ctx context.Context) (detail string, err error)
	skip string // non-empty: not run, reported SKIP with this reason
}

// warning is a check's error that is reported WARN without failing the
// doctor: the setup works, but less safely than it could.
type warning struct{ msg string }

func (w warning) Error() string { return w.msg }

// Run prints the report.
func (d *DoctorCmd) Run(out *Output) error {
	checks := []check{
		{name: "pi", run: d.checkPi},
		{name: "state dir", run: d.checkStateDir},
		{name: "tailscale", run: d.checkTailscale},
		{name: "bundle cache", run: d.checkCache},
		{name: "server key", run: d.checkServerKey},
		{name: "permissions", run: d.checkPermissions},
	}
	if len(d.WhoisStatic) > 0 {
		checks[2].skip = "static identity map configured"
	}
	for _, addr := range d.Dial {
		checks = append(checks, check{name: "dial " + addr, run: func(ctx context.Context) (string, error) { return d.checkDial(ctx, addr) }})
	}
	failed := 0
	for _, c := range checks {
		if c.skip != "" {
			fmt.Fprintf(out.Out, "SKIP %-12s %s\n", c.name, c.skip)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.Timeout)
		detail, err := c.run(ctx)
		cancel()
		var w warning
		if errors.As(err, &w) {
			fmt.Fprintf(out.Out, "WARN %-12s %v\n", c.name, err)
			continue
		}
		if err != nil {
			failed++
			fmt.Fprintf(out.Out, "FAIL %-12s %v\n", c.name, err)
			continue
		}
		fmt.Fprintf(out.Out, "PASS %-12s %s\n", c.name, detail)
	}
	if failed > 0 {
		fmt.Fprintf(out.Out, "%d check(s) failed\n", failed)
		return cli.ExitCode(1)
	}
	return nil
}

func (d *DoctorCmd) checkPi(ctx context.Context) (string, error) {
	path, err := exec.LookPath(d.Pi)
	if err != nil {
		return "", fmt.Errorf("%s not found: %w", d.Pi, err)
	}
	b, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	return fmt.Sprintf("%s (version %s)", path, strings.TrimSpace(string(b))), nil
}

func (d *DoctorCmd) checkStateDir(context.Context) (string, error) {
	if err := os.MkdirAll(d.StateDir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(d.StateDir, ".doctor-*")
	if err != nil {
		return "", fmt.Errorf("%s is not writable: %w", d.StateDir, err)
	}
	name := f.Name()
	_, werr := f.WriteString("ok")
	cerr := f.Close()
	os.Remove(name)
	if err := errors.Join(werr, cerr); err != nil {
		return "", fmt.Errorf("%s is not writable: %w", d.StateDir, err)
	}
	if free, ok := freeSpace(d.StateDir); ok {
		if free < lowStateSpace {
			// The agent keeps working on a full disk, but refuses spawns and
			// holds task reports in memory until they can be written.
			return "", warning{fmt.Sprintf("%s writable, but only %d MiB free: spawns fail and task reports wait in memory when it fills up", d.StateDir, free>>20)}
		}
		return fmt.Sprintf("%s writable, %d MiB free", d.StateDir, free>>20), nil
	}
	return d.StateDir + " writable", nil
}

// lowStateSpace is the free space under which doctor warns about the state
// directory.
const lowStateSpace = 64 << 20

func (d *DoctorCmd) checkTailscale(ctx context.Context) (string, error) {
	ts := &identity.Tailscale{Binary: d.Tailscale}
	st, err := ts.Status(ctx)
	if err != nil {
		return "", err
	}
	if !st.Running() {
		return "", fmt.Errorf("tailscaled is %q, not Running", st.BackendState)
	}
	ip, err := ts.IPv4(ctx)
	if err != nil {
		return "", err
	}
	return "running, this machine is " + ip.String(), nil
}

// checkDial resolves a --dial address and asks whois who it is, without
// connecting (a connection would be a first contact on the server): it
// must be the pinned server, or serve would refuse it.
func (d *DoctorCmd) checkDial(ctx context.Context, addr string) (string, error) {
	if d.Server == "" {
		return "", errors.New("no --server: the pinned server is needed to check the address")
	}
	pin, err := trust.ParsePin(d.Server)
	if err != nil {
		return "", err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("want HOST:PORT: %w", err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("cannot resolve %s: %v", host, err)
	}
	ip := ips[0].Unmap()
	var whois identity.Whois = &identity.Tailscale{Binary: d.Tailscale}
	if len(d.WhoisStatic) > 0 {
		if whois, err = identity.ParseStatic(d.WhoisStatic...); err != nil {
			return "", err
		}
	}
	id, err := whois.Whois(ctx, ip)
	if err != nil {
		return "", fmt.Errorf("whois %s: %w", ip, err)
	}
	if !pin.Matches(id) {
		return "", fmt.Errorf("%s is %s, not the pinned server %s: serve would refuse it", ip, id, pin)
	}
	return fmt.Sprintf("%s is %s, the pinned server", ip, id), nil
}

func (d *DoctorCmd) checkCache(context.Context) (string, error) {
	root := filepath.Join(d.StateDir, "bundles")
	names, err := os.ReadDir(filepath.Join(root, cache.PointerDir))
	if errors.Is(err, os.ErrNotExist) {
		return "empty (no bundle synced yet)", nil
	}
	if err != nil {
		return "", err
	}
	c, err := cache.Open(root)
	if err != nil {
		return "", err
	}
	var bad []string
	n := 0
	for _, e := range names {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		n++
		if err := c.VerifyBundle(name); err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("%d of %d bundle(s) damaged: %s", len(bad), n, strings.Join(bad, "; "))
	}
	return fmt.Sprintf("%d bundle(s) intact", n), nil
}

// checkServerKey reports which server the agent obeys: the keys given,
// the key trusted on first use, or (a warning) any server of the pinned
// machine without a key.
func (d *DoctorCmd) checkServerKey(context.Context) (string, error) {
	keys, err := auth.ParsePublicKeys(strings.Join(d.ServerKey, ","))
	if err != nil {
		return "", fmt.Errorf("--server-key: %w", err)
	}
	var learnt []ed25519.PublicKey
	if d.TrustFirstServerKey {
		if learnt, err = auth.ReadPublicKeys(filepath.Join(d.StateDir, agent.TrustedServerKeysFile)); err != nil {
			return "", err
		}
	}
	var parts []string
	switch {
	case len(keys) > 0:
		parts = append(parts, fmt.Sprintf("obeys %d key(s): %s", len(keys), formatKeys(keys)))
	case d.TrustFirstServerKey && len(learnt) > 0:
		parts = append(parts, "obeys the key trusted on first use: "+formatKeys(learnt))
	case d.TrustFirstServerKey:
		parts = append(parts, "trusts the key of the first server that connects (none yet)")
	case !d.AllowV1Server:
		return "", errors.New("no server key: serve refuses to start without --server-key, --trust-first-server-key or --allow-v1-server")
	}
	if d.AllowV1Server {
		return "", warning{strings.Join(append(parts, "SERVERS WITHOUT A KEY PROOF ARE ACCEPTED (--allow-v1-server): any process on the pinned machine can command this agent"), "; ")}
	}
	return strings.Join(parts, "; "), nil
}

func formatKeys(keys []ed25519.PublicKey) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = auth.FormatPublicKey(k)
	}
	return strings.Join(s, ", ")
}

// checkPermissions fails when other users can reach the state directory
// or the files that hold keys and the database.
func (d *DoctorCmd) checkPermissions(context.Context) (string, error) {
	paths := []string{d.StateDir, filepath.Join(d.StateDir, agent.AgentKeyFile),
		filepath.Join(d.StateDir, agent.TrustedServerKeysFile), filepath.Join(d.StateDir, "agent.db"),
		filepath.Join(d.StateDir, "handles"), filepath.Join(d.StateDir, "workers")}
	problems, err := fileperm.Check(paths...)
	if err != nil {
		return "", err
	}
	if len(problems) > 0 {
		return "", errors.New(fileperm.Summary(problems))
	}
	return "state directory and key files private to this user", nil
}
