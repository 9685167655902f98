package agent

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"example.com/pifleet/transport"
)

// A model probe asks pi, started with a bundle's extensions and nothing
// else, which models it can use (get_available_models), so that a spawn
// whose models are all unusable is refused before a worker starts
// (AC-4.5). Starting pi costs seconds, so the agent runs one probe per
// probe key at a time, shares it with every spawn that needs it meanwhile
// (single flight) and keeps its answer until something it depends on
// changes.
//
// The key is what selects pi and its configuration: the probe's command
// line (pi's path, the agent's pi arguments and the bundle's extensions,
// whose cached paths name the bundle version), its whole environment
// (provider API keys, PI_CODING_AGENT_DIR, HOME) and, when the working
// directory has a project .pi directory, that directory (project settings
// and extensions). An answer is kept while its stamp holds: the pi
// executable (resolved path, size and modification time, so that an
// upgrade or a relinked version shows), and the size and modification
// time of pi's agent-wide auth.json, models.json, settings.json and
// extensions directory and of the project's .pi/settings.json and
// .pi/extensions, as they are when the probe ends. A changed stamp means a
// new probe. Failed probes are not kept: the next spawn tries again.
//
// A spawn that stops waiting (its connection dropped) leaves the probe
// running for the others and for the cache; only the agent's shutdown or
// the probe timeout ends a probe.

// maxKeptProbes bounds the answers kept (one per bundle version and
// environment); the oldest go first.
const maxKeptProbes = 64

// modelCache is the agent's probes, by probe key. The zero value is ready.
type modelCache struct {
	mu      sync.Mutex
	flights map[string]*probeFlight
	// joined, when set (tests), is called each time a spawn waits for a
	// probe that another spawn started.
	joined func()
}

// probeFlight is one probe: running until done is closed, then its answer.
type probeFlight struct {
	stamp   string
	started time.Time
	done    chan struct{}
	models  []transport.ModelRef // set before done is closed
	err     error
}

func (f *probeFlight) finished() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// known returns the models of every kept probe, for hello; nil when none
// answered yet (then hello omits availableModels).
func (c *modelCache) known() []transport.ModelRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []transport.ModelRef
	for _, f := range c.flights {
		if !f.finished() || f.err != nil {
			continue
		}
		for _, m := range f.models {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// availableModels returns the models pi can use with argv, env and dir
// (a pi --mode rpc --no-session command line): the kept answer when its
// stamp still holds, else the answer of the probe running for the same
// key, else that of a new probe. It returns when the answer is known or
// ctx ends, whichever is first; ctx ending does not end the probe.
func (a *Agent) availableModels(ctx context.Context, argv []string, env []string, dir string) ([]transport.ModelRef, error) {
	key, stamp := probeKey(argv, env, dir), probeStamp(argv, env, dir)
	c := &a.models
	c.mu.Lock()
	f, ok := c.flights[key]
	joined := ok && !f.finished()
	if ok && f.finished() && (f.err != nil || f.stamp != stamp) {
		ok = false // failed, or pi or its configuration changed since
	}
	if !ok {
		f = &probeFlight{started: time.Now(), done: make(chan struct{})}
		if c.flights == nil {
			c.flights = map[string]*probeFlight{}
		}
		c.flights[key] = f
		c.prune()
		// The agent's context, not the spawn's: a spawn that gives up
		// must not end the probe the others wait for.
		timeout := a.cfg.ProbeTimeout
		a.wg.Go(func() {
			f.models, f.err = probeModels(a.runCtx, timeout, argv, env, dir)
			// Taken after the probe: pi itself writes its files as it
			// starts (it creates a missing auth.json, it refreshes an
			// OAuth token), which must not call for a second probe.
			f.stamp = probeStamp(argv, env, dir)
			close(f.done)
		})
	}
	hook := c.joined
	c.mu.Unlock()
	if joined && hook != nil {
		hook()
	}
	select {
	case <-f.done:
		return f.models, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("spawn cancelled after waiting %s for the model probe (it goes on for the other spawns): %w",
			time.Since(f.started).Round(time.Millisecond), context.Cause(ctx))
	}
}

// prune drops the oldest finished probes beyond maxKeptProbes. c.mu is
// held.
func (c *modelCache) prune() {
	for len(c.flights) > maxKeptProbes {
		var oldest string
		var at time.Time
		for k, f := range c.flights {
			if f.finished() && (oldest == "" || f.started.Before(at)) {
				oldest, at = k, f.started
			}
		}
		if oldest == "" {
			return // every one still runs
		}
		delete(c.flights, oldest)
	}
}

// probeKey is what selects pi and its configuration (see the comment at
// the top).
func probeKey(argv, env []string, dir string) string {
	h := sha256.New()
	for _, s := range argv {
		fmt.Fprintf(h, "a%d:%s", len(s), s)
	}
	sorted := slices.Clone(env)
	slices.Sort(sorted)
	for _, s := range sorted {
		fmt.Fprintf(h, "e%d:%s", len(s), s)
	}
	if st, err := os.Stat(filepath.Join(dir, ".pi")); err == nil && st.IsDir() {
		fmt.Fprintf(h, "d%d:%s", len(dir), dir)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// probeStamp describes the files a probe's answer depends on (see the
// comment at the top): two equal stamps mean nothing visible changed.
func probeStamp(argv, env []string, dir string) string {
	var b strings.Builder
	stat := func(p string) {
		st, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "%s:-\n", p)
			return
		}
		fmt.Fprintf(&b, "%s:%d:%d\n", p, st.Size(), st.ModTime().UnixNano())
	}
	if exe, err := exec.LookPath(argv[0]); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		stat(exe)
	}
	agentDir := envValue(env, "PI_CODING_AGENT_DIR")
	if agentDir == "" {
		if home := envValue(env, "HOME"); home != "" {
			agentDir = filepath.Join(home, ".pi", "agent")
		}
	}
	if agentDir != "" {
		for _, name := range []string{"auth.json", "models.json", "settings.json", "extensions"} {
			stat(filepath.Join(agentDir, name))
		}
	}
	for _, name := range []string{"settings.json", "extensions"} {
		stat(filepath.Join(dir, ".pi", name))
	}
	return b.String()
}

// envValue is the last value of k in env ("" when unset), as a process
// started with env sees it.
func envValue(env []string, k string) string {
	v := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			v = kv[len(k)+1:]
		}
	}
	return v
}

// ErrProbe is matched by a failed model probe.
var ErrProbe = errors.New("agent: model probe failed")

// probeModels runs argv (a pi --mode rpc --no-session command line) and
// asks it for its available models. Its error says what happened: the
// agent shut down, pi gave no answer within timeout, pi refused, or pi
// ended (with what it wrote on stderr).
func probeModels(parent context.Context, timeout time.Duration, argv, env []string, dir string) ([]transport.ModelRef, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	var stderr strings.Builder
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProbe, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProbe, err)
	}
	if err := cmd.Start(); err != nil {
		if parent.Err() != nil {
			return nil, fmt.Errorf("%w: the agent shut down before pi started", ErrProbe)
		}
		return nil, fmt.Errorf("%w: %v", ErrProbe, err)
	}
	waited := false
	defer func() {
		stdin.Close()
		cancel()
		if !waited {
			_ = cmd.Wait()
		}
	}()
	// A failed write means pi is gone already: what it said is below.
	_, _ = io.WriteString(stdin, `{"type":"get_available_models","id":"pifleet-probe"}`+"\n")
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r struct {
			Type    string `json:"type"`
			ID      string `json:"id"`
			Success bool   `json:"success"`
			Error   string `json:"error"`
			Data    struct {
				Models []struct {
					Provider string `json:"provider"`
					ID       string `json:"id"`
				} `json:"models"`
			} `json:"data"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Type != "response" || r.ID != "pifleet-probe" {
			continue
		}
		if !r.Success {
			return nil, fmt.Errorf("%w: pi refused get_available_models: %s", ErrProbe, r.Error)
		}
		out := make([]transport.ModelRef, 0, len(r.Data.Models))
		for _, m := range r.Data.Models {
			out = append(out, transport.ModelRef{Provider: m.Provider, ID: m.ID})
		}
		return out, nil
	}
	// pi closed its output: wait for it, so that stderr is complete.
	cancelled, timedOut := parent.Err() != nil, ctx.Err() != nil
	_ = cmd.Wait()
	waited = true
	exit := cmd.ProcessState.String() // "exit status 1", "signal: killed"
	cancelled = cancelled || parent.Err() != nil
	timedOut = timedOut || ctx.Err() != nil
	said := strings.TrimSpace(stderr.String())
	switch {
	case cancelled:
		return nil, fmt.Errorf("%w: the agent shut down %s into the probe", ErrProbe, time.Since(start).Round(time.Millisecond))
	case timedOut:
		if said != "" {
			return nil, fmt.Errorf("%w: pi gave no answer within %s; it wrote: %s", ErrProbe, timeout, said)
		}
		return nil, fmt.Errorf("%w: pi gave no answer within %s", ErrProbe, timeout)
	case said != "":
		return nil, fmt.Errorf("%w: pi ended without answering (%s): %s", ErrProbe, exit, said)
	default:
		return nil, fmt.Errorf("%w: pi ended without answering (%s) and wrote nothing on stderr", ErrProbe, exit)
	}
}

type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// chooseModel walks candidates in order and returns the first pi can use.
// Matching ignores the thinking level, which is a flag of its own.
func chooseModel(candidates []transport.ModelRef, available []transport.ModelRef) (transport.ModelRef, bool) {
	for _, c := range candidates {
		for _, m := range available {
			if m.Provider == c.Provider && m.ID == c.ID {
				return c, true
			}
		}
	}
	return transport.ModelRef{}, false
}

func modelNames(ms []transport.ModelRef) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = m.Provider + "/" + m.ID
	}
	return strings.Join(s, ", ")
}
