package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/fileperm"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/identity"
)

// DoctorCmd is `doctor`: one PASS/FAIL/SKIP line per check, non-zero exit
// when one failed.
type DoctorCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Timeout  time.Duration `help:"Bound of the whole report." default:"30s" env:"PIFLEET_DOCTOR_TIMEOUT"`
}

// Run asks the server for its report and prints it after the check that
// the server answers at all.
func (c *DoctorCmd) Run(out *Output) error {
	rep := c.report()
	if c.JSON {
		if err := printJSON(out.Out, rep); err != nil {
			return err
		}
	} else {
		width := 18 // names grow with the agents' ("bundle cache on gpu-box-1"): keep the details aligned
		for _, ch := range rep.Checks {
			width = max(width, len(ch.Name))
		}
		for _, ch := range rep.Checks {
			fmt.Fprintf(out.Out, "%-4s %-*s %s\n", strings.ToUpper(string(ch.Result)), width, ch.Name, ch.Detail)
		}
	}
	failed := 0
	for _, ch := range rep.Checks {
		if ch.Result == controlapi.CheckFail {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(rep.Checks))
	}
	if !c.JSON {
		fmt.Fprintln(out.Out, "all green")
	}
	return nil
}

func (c *DoctorCmd) report() controlapi.DoctorReport {
	api := controlapi.Check{Name: "control api", Result: controlapi.CheckPass, Detail: "answering at " + c.API}
	cl, err := c.client()
	if err != nil {
		api.Result, api.Detail = controlapi.CheckFail, err.Error()
		return controlapi.DoctorReport{Checks: []controlapi.Check{api}}
	}
	defer cl.Close()
	ctx, cancel := background()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, c.Timeout)
	defer cancelT()
	rep, err := cl.Doctor(ctx)
	if err != nil {
		api.Result, api.Detail = controlapi.CheckFail, err.Error()
		return controlapi.DoctorReport{Checks: []controlapi.Check{api}}
	}
	rep.Checks = append([]controlapi.Check{api}, rep.Checks...)
	return rep
}

// serverChecks are the checks serve runs for GET /v1/doctor.
type serverChecks struct {
	// tailscale is nil when a static identity map is in force.
	tailscale *identity.Tailscale
	registry  string
	timeout   time.Duration
	// caches verifies the connected agents' bundle caches (the fleet);
	// nil leaves them unchecked.
	caches cacheVerifier
	// stateDir is checked for permissions that let other users in ("":
	// not checked).
	stateDir string
}

// cacheVerifier is what doctor needs of the fleet to check the agents'
// bundle caches.
type cacheVerifier interface {
	VerifyCaches(ctx context.Context, machine string) ([]fleet.CacheCheck, error)
}

// run returns tailscale, one line per agent, each connected agent's
// bundle cache, and the registry's integrity.
func (s serverChecks) run(ctx context.Context, st fleet.Status) []controlapi.Check {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	checks := []controlapi.Check{s.checkTailscale(ctx)}
	if len(st.Agents) == 0 {
		checks = append(checks, controlapi.Check{Name: "agents", Result: controlapi.CheckFail,
			Detail: "no agent in the directory (serve --agent NAME=HOST:PORT, or --tailnet)"})
	}
	caches := s.checkCaches(ctx, st.Agents)
	for i, a := range st.Agents {
		checks = append(checks, agentCheck(a))
		if caches[i] != nil {
			checks = append(checks, *caches[i])
		}
	}
	checks = append(checks, registryCheck(s.registry))
	if s.stateDir != "" {
		checks = append(checks, permissionsCheck(s.stateDir))
	}
	return checks
}

// permissionsCheck fails when other users can reach the state directory,
// the server's key, the control API's token or the database.
func permissionsCheck(stateDir string) controlapi.Check {
	c := controlapi.Check{Name: "permissions", Result: controlapi.CheckPass,
		Detail: "state directory, key and token private to this user"}
	problems, err := fileperm.Check(stateDir, filepath.Join(stateDir, fleet.KeyFile),
		filepath.Join(stateDir, controlapi.TokenName), filepath.Join(stateDir, fleet.StateFile))
	switch {
	case err != nil:
		c.Result, c.Detail = controlapi.CheckFail, err.Error()
	case len(problems) > 0:
		c.Result, c.Detail = controlapi.CheckFail, fileperm.Summary(problems)
	}
	return c
}

// checkCaches verifies the bundle cache of every connected agent, all at
// once (each agent hashes on its own machine), and returns the line of
// agents[i] at i; nil for an agent not connected, which its agent line
// already reports.
func (s serverChecks) checkCaches(ctx context.Context, agents []fleet.AgentStatus) []*controlapi.Check {
	out := make([]*controlapi.Check, len(agents))
	if s.caches == nil {
		return out
	}
	var wg sync.WaitGroup
	for i, a := range agents {
		if a.State != transport.StateEstablished {
			continue
		}
		wg.Go(func() {
			c := cacheCheck(a.Name, func() ([]fleet.CacheCheck, error) { return s.caches.VerifyCaches(ctx, a.Name) })
			out[i] = &c
		})
	}
	wg.Wait()
	return out
}

// cacheCheck turns an agent's cache verification into its doctor line:
// pass when every bundle is intact, fail naming each damaged bundle and
// its files, skip for an agent that cannot verify its cache.
func cacheCheck(agent string, verify func() ([]fleet.CacheCheck, error)) controlapi.Check {
	c := controlapi.Check{Name: "bundle cache on " + agent}
	bundles, err := verify()
	switch {
	case errors.Is(err, fleet.ErrNotSupported):
		c.Result, c.Detail = controlapi.CheckSkip, "the agent cannot verify its cache (not a pifleet agent, or an older one); run its own doctor on that machine"
		return c
	case errors.Is(err, fleet.ErrNotConnected):
		c.Result, c.Detail = controlapi.CheckSkip, "the agent disconnected before its cache was checked"
		return c
	case err != nil:
		c.Result, c.Detail = controlapi.CheckFail, "cannot verify: "+err.Error()
		return c
	}
	var bad []string
	intact := 0
	for _, b := range bundles {
		switch {
		case b.OK:
			intact++
		case b.Code == "not_cached":
			// Removed from the cache while it was verified: nothing
			// left to be damaged.
		default:
			bad = append(bad, damage(b))
		}
	}
	if len(bad) > 0 {
		c.Result = controlapi.CheckFail
		c.Detail = fmt.Sprintf("%d of %d bundle(s) corrupt: %s", len(bad), len(bad)+intact, strings.Join(bad, "; "))
		return c
	}
	c.Result = controlapi.CheckPass
	if intact == 0 {
		c.Detail = "no bundle cached yet"
	} else {
		c.Detail = fmt.Sprintf("%d bundle(s) intact", intact)
	}
	return c
}

// damage describes a damaged cached bundle: its damaged files when the
// agent named them, else what the agent said.
func damage(b fleet.CacheCheck) string {
	name := b.Bundle
	if b.BundleHash != "" {
		name += " (" + b.BundleHash[:min(12, len(b.BundleHash))] + ")"
	}
	if len(b.Problems) == 0 {
		return fmt.Sprintf("%s: %s: %s", name, b.Code, b.Message)
	}
	files := make([]string, len(b.Problems))
	for i, p := range b.Problems {
		files[i] = p.Path + ": " + p.Reason
	}
	return name + ": " + strings.Join(files, ", ")
}

func (s serverChecks) checkTailscale(ctx context.Context) controlapi.Check {
	c := controlapi.Check{Name: "tailscale"}
	if s.tailscale == nil {
		c.Result, c.Detail = controlapi.CheckSkip, "static identity map in force (--whois-static): tailnet identities are not checked"
		return c
	}
	st, err := s.tailscale.Status(ctx)
	if err == nil && !st.Running() {
		err = fmt.Errorf("tailscaled is %q, not Running", st.BackendState)
	}
	if err != nil {
		c.Result, c.Detail = controlapi.CheckFail, "tailscale down: "+err.Error()
		return c
	}
	c.Result, c.Detail = controlapi.CheckPass, "running"
	if ip, err := s.tailscale.IPv4(ctx); err == nil {
		c.Detail += ", this machine is " + ip.String()
	}
	return c
}

// agentCheck tells apart connected, whois denied (the trust gate refused
// the machine: it is not dialled again until its policy changes) and
// unreachable.
func agentCheck(a fleet.AgentStatus) controlapi.Check {
	c := controlapi.Check{Name: "agent " + a.Name}
	switch a.State {
	case transport.StateEstablished:
		c.Result = controlapi.CheckPass
		c.Detail = fmt.Sprintf("connected at %s (machine %s, platform %s, version %s, policy %s)",
			a.Addr, dash(a.Machine), dash(a.Platform), dash(a.Version), dash(string(a.Policy)))
	case transport.StateRejected:
		c.Result = controlapi.CheckFail
		c.Detail = "whois denied: " + orText(a.LastError, "the machine's identity or trust policy was refused") +
			" (pifleet-server trust set MACHINE allow|steer lets it in)"
	default:
		c.Result = controlapi.CheckFail
		c.Detail = fmt.Sprintf("unreachable (%s) at %s: %s", a.State, strings.Join(a.Addresses, ","), orText(a.LastError, "not connected yet"))
	}
	return c
}

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// registryCheck re-hashes every file of every published bundle.
func registryCheck(root string) controlapi.Check {
	c := controlapi.Check{Name: "bundle registry"}
	entries, err := registry.List(root)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		c.Result, c.Detail = controlapi.CheckPass, "no bundle published in "+root+" yet"
		return c
	}
	if err != nil {
		c.Result, c.Detail = controlapi.CheckFail, err.Error()
		return c
	}
	var bad []string
	for _, e := range entries {
		if e.Err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", e.Name, e.Err))
			continue
		}
		m, err := registry.Show(root, e.Name)
		if err == nil {
			err = verifyPublished(root, m)
		}
		if err != nil {
			bad = append(bad, err.Error())
		}
	}
	if len(bad) > 0 {
		c.Result = controlapi.CheckFail
		c.Detail = fmt.Sprintf("%d of %d bundle(s) corrupt: %s", len(bad), len(entries), strings.Join(bad, "; "))
		return c
	}
	c.Result, c.Detail = controlapi.CheckPass, fmt.Sprintf("%d bundle(s) intact in %s", len(entries), root)
	return c
}

// verifyPublished checks a published bundle's files against its manifest
// (<root>/<name>/files/<path>), naming each that is missing, of the wrong
// size or of the wrong content.
func verifyPublished(root string, m *bundle.Manifest) error {
	dir := filepath.Join(root, m.Name, "files")
	var problems []string
	for _, f := range m.Files {
		if err := verifyFile(filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			problems = append(problems, f.Path+": "+err.Error())
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("bundle %s: %s", m.Name, strings.Join(problems, ", "))
	}
	return nil
}

func verifyFile(path string, f bundle.File) error {
	file, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("missing")
		}
		return err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	switch {
	case err != nil:
		return err
	case n != f.Bytes:
		return fmt.Errorf("%d bytes, the manifest says %d", n, f.Bytes)
	case hex.EncodeToString(h.Sum(nil)) != f.SHA256:
		return errors.New("content does not match its hash")
	}
	return nil
}
