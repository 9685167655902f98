package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// TestDoctorBundleCache runs serve with a real agent whose bundle cache
// holds two bundles: doctor passes them intact, then, once a cached file
// is damaged, fails naming the bundle and the file (AC-5.3).
func TestDoctorBundleCache(t *testing.T) {
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	for name, files := range map[string]map[string]string{
		"default": {"skills/a/SKILL.md": "# a\n", "AGENTS.md": "be brief\n"},
		"review":  {"skills/r/SKILL.md": "# r\n"},
	} {
		if _, err := registry.Publish(reg, name, source(t, files), registry.PublishOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The agent's cache holds what its spawns would have synced.
	cacheDir := filepath.Join(dir, "agent-cache")
	bc, err := cache.Open(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	var cached *cache.Result
	for _, name := range []string{"default", "review"} {
		res, err := bc.Sync(context.Background(), registry.NewDir(reg), name, cache.SyncOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if name == "default" {
			cached = res
		}
	}
	whois, err := identity.ParseStatic("127.0.0.1=box")
	if err != nil {
		t.Fatal(err)
	}
	addr := runAgent(t, agent.Config{Machine: "box", Listen: "127.0.0.1:0", Pin: trust.Pin{Machine: "box"},
		Whois: whois, StateDir: t.TempDir(), CacheDir: cacheDir, SessionsPoll: -1})

	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + addr, "gone=" + closedPort(t)}, WhoisStatic: []string{"127.0.0.1=box"}}
	s, c := startServe(t, cmd)
	api := "--api=" + s.API.String()
	if status, out, errOut := runCLI(t, "trust", "set", "box", "allow", api); status != 0 {
		t.Fatalf("trust set: %d %s %s", status, out, errOut)
	}
	awaitAgentState(t, c, "box", "established")

	_, out, _ := runCLI(t, "doctor", api)
	if !hasCheck(out, "PASS", "bundle cache on box", "2 bundle(s) intact") {
		t.Errorf("doctor, intact cache:\n%s", out)
	}
	if strings.Contains(out, "bundle cache on gone") {
		t.Errorf("an unreachable agent got a cache line besides its agent line:\n%s", out)
	}

	skill := filepath.Join(cached.Dir, "skills", "a", "SKILL.md")
	if err := os.WriteFile(skill, []byte("# b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := runCLI(t, "doctor", api)
	want := fmt.Sprintf("1 of 2 bundle(s) corrupt: default (%s): skills/a/SKILL.md: content does not match its hash",
		cached.Manifest.BundleHash[:12])
	if !hasCheck(out, "FAIL", "bundle cache on box", want) {
		t.Errorf("doctor, damaged cache lacks %q:\n%s", want, out)
	}
	// The unreachable agent and the damaged cache.
	if status == 0 || !strings.Contains(errOut, "2 of ") {
		t.Errorf("doctor: status %d, %s", status, errOut)
	}
}

// fakeCacheVerifier answers VerifyCaches from a table, per agent.
type fakeCacheVerifier map[string]fakeCaches

type fakeCaches struct {
	checks []fleet.CacheCheck
	err    error
}

func (f fakeCacheVerifier) VerifyCaches(_ context.Context, machine string) ([]fleet.CacheCheck, error) {
	r, ok := f[machine]
	if !ok {
		return nil, fmt.Errorf("%w: %q", fleet.ErrUnknownAgent, machine)
	}
	return r.checks, r.err
}

// Each connected agent gets one cache line right after its agent line;
// an agent not connected gets none (its agent line says so), one that
// cannot verify gets a skip.
func TestCacheChecks(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	verifier := fakeCacheVerifier{
		"intact": {checks: []fleet.CacheCheck{{Bundle: "a", BundleHash: hash, OK: true}, {Bundle: "b", BundleHash: hash, OK: true}}},
		"empty":  {checks: []fleet.CacheCheck{}},
		"ts":     {err: fmt.Errorf("%w: ts (cache_verify)", fleet.ErrNotSupported)},
		"lost":   {err: fmt.Errorf("%w: lost is reconnecting", fleet.ErrNotConnected)},
		"slow":   {err: context.DeadlineExceeded},
		"bad": {checks: []fleet.CacheCheck{
			{Bundle: "a", BundleHash: hash, OK: true},
			{Bundle: "b", BundleHash: hash, Code: "corrupt", Message: "m",
				Problems: []fleet.CacheProblem{{Path: "x.md", Reason: "missing"}, {Path: "y.md", Reason: "not in the manifest"}}},
			{Bundle: "c", Code: "bad_pointer", Message: "(pointer): must be an object"},
			{Bundle: "gone", Code: "not_cached", Message: "left the cache"},
		}},
	}
	var agents []fleet.AgentStatus
	for _, name := range []string{"intact", "empty", "ts", "lost", "slow", "bad"} {
		agents = append(agents, fleet.AgentStatus{Name: name, State: transport.StateEstablished})
	}
	agents = append(agents, fleet.AgentStatus{Name: "down", State: transport.StateLost})
	s := serverChecks{registry: t.TempDir(), timeout: time.Minute, caches: verifier}
	var got []string
	for _, c := range s.run(context.Background(), fleet.Status{Agents: agents}) {
		if c.Name == "tailscale" || c.Name == "bundle registry" {
			continue
		}
		line := string(c.Result) + " " + c.Name
		if strings.HasPrefix(c.Name, "bundle cache") {
			line += ": " + c.Detail
		}
		got = append(got, line)
	}
	want := []string{
		"pass agent intact", "pass bundle cache on intact: 2 bundle(s) intact",
		"pass agent empty", "pass bundle cache on empty: no bundle cached yet",
		"pass agent ts", "skip bundle cache on ts: the agent cannot verify its cache (not a pifleet agent, or an older one); run its own doctor on that machine",
		"pass agent lost", "skip bundle cache on lost: the agent disconnected before its cache was checked",
		"pass agent slow", "fail bundle cache on slow: cannot verify: " + context.DeadlineExceeded.Error(),
		"pass agent bad", "fail bundle cache on bad: 2 of 3 bundle(s) corrupt: b (abababababab): x.md: missing, y.md: not in the manifest; c: bad_pointer: (pointer): must be an object",
		"fail agent down",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("checks (-want +got):\n%s", d)
	}
}

// doctor fails when other users can reach the state directory or the
// server's key or token, and passes once they are private.
func TestDoctorPermissions(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	for _, name := range []string{"server.key", "control.token"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)
	}
	if c := permissionsCheck(dir); c.Result != controlapi.CheckPass {
		t.Fatalf("private state: %+v", c)
	}
	os.Chmod(filepath.Join(dir, "server.key"), 0o640)
	os.Chmod(dir, 0o755)
	c := permissionsCheck(dir)
	if c.Result != controlapi.CheckFail || !strings.Contains(c.Detail, "server.key is 0640") || !strings.Contains(c.Detail, "is 0755") {
		t.Fatalf("open state: %+v", c)
	}
}
