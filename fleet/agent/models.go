package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"example.com/pifleet/transport"
)

// modelCache remembers, per bundle version, which models pi can use with
// that bundle's extensions loaded (an extension may register providers).
type modelCache struct {
	mu sync.Mutex
	m  map[string]modelProbe // by bundleHash
}

type modelProbe struct {
	models []transport.ModelRef
	err    error
}

// known returns the models of every probe so far, for hello; nil when none
// ran yet (then hello omits availableModels).
func (c *modelCache) known() []transport.ModelRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []transport.ModelRef
	for _, p := range c.m {
		for _, m := range p.models {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// availableModels asks pi, started with the bundle's extensions and
// nothing else, for get_available_models, once per bundle version. It runs
// before the worker starts, so that a spawn whose models are all unusable
// is refused without starting one (AC-4.5).
func (a *Agent) availableModels(ctx context.Context, key string, argv []string, env []string, dir string) ([]transport.ModelRef, error) {
	a.models.mu.Lock()
	if p, ok := a.models.m[key]; ok {
		a.models.mu.Unlock()
		return p.models, p.err
	}
	a.models.mu.Unlock()
	models, err := probeModels(ctx, a.cfg.ProbeTimeout, argv, env, dir)
	if err != nil && ctx.Err() != nil {
		return nil, err // not cached: the caller gave up
	}
	a.models.mu.Lock()
	a.models.m[key] = modelProbe{models: models, err: err}
	a.models.mu.Unlock()
	return models, err
}

// ErrProbe is matched by a failed model probe.
var ErrProbe = errors.New("agent: model probe failed")

// probeModels runs argv (a pi --mode rpc --no-session command line) and
// asks it for its available models.
func probeModels(ctx context.Context, timeout time.Duration, argv, env []string, dir string) ([]transport.ModelRef, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
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
		return nil, fmt.Errorf("%w: %v", ErrProbe, err)
	}
	defer func() {
		stdin.Close()
		cancel()
		_ = cmd.Wait()
	}()
	if _, err := io.WriteString(stdin, `{"type":"get_available_models","id":"pifleet-probe"}`+"\n"); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProbe, err)
	}
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
			return nil, fmt.Errorf("%w: get_available_models: %s", ErrProbe, r.Error)
		}
		out := make([]transport.ModelRef, 0, len(r.Data.Models))
		for _, m := range r.Data.Models {
			out = append(out, transport.ModelRef{Provider: m.Provider, ID: m.ID})
		}
		return out, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: no answer within %s", ErrProbe, timeout)
	}
	return nil, fmt.Errorf("%w: pi ended without answering: %s", ErrProbe, strings.TrimSpace(stderr.String()))
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
