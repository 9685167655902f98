//go:build unix

package agent

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/transport"
)

// syncBuffer is a log sink the agent's goroutines may share, which a
// test can wait on.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed and replaced at each write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

// waitFor waits until the buffer contains sub.
func (s *syncBuffer) waitFor(t testing.TB, sub string) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		s.mu.Lock()
		if strings.Contains(s.b.String(), sub) {
			s.mu.Unlock()
			return
		}
		if s.written == nil {
			s.written = make(chan struct{})
		}
		written := s.written
		s.mu.Unlock()
		select {
		case <-written:
		case <-deadline:
			t.Fatalf("no %q within %s in:\n%s", sub, waitLimit, s.String())
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A spawn's env values are stored only where re-adoption needs them (the
// worker's spec in the 0600 state file), the agent's own environment is
// not stored at all, and neither is ever logged; a restarted agent
// rebuilds the worker's environment from its own and the saved values.
func TestSpawnEnvIsStoredNarrowlyAndNeverLogged(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, hopts{env: []string{"PROVIDER_API_KEY=agents-own-secret"}, mod: func(c *Config) {
		c.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel)
	}})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "default", func(f *transport.SpawnFrame) {
		f.Env = map[string]string{"SPAWN_TOKEN": "the-spawns-secret"}
	})
	raw, ok, err := h.a.store.GetKV(specKeyPrefix + inst.InstanceID)
	if err != nil || !ok {
		t.Fatalf("stored spec: %v, %v", ok, err)
	}
	var ss savedSpec
	if err := json.Unmarshal(raw, &ss); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ss.Env, "SPAWN_TOKEN=the-spawns-secret") {
		t.Errorf("the spawn's env is not kept for re-adoption: %v", ss.Env)
	}
	if strings.Contains(string(raw), "agents-own-secret") {
		t.Errorf("the agent's own environment is stored: %s", raw)
	}
	full := h.a.environment(launch{extraEnv: map[string]string{"SPAWN_TOKEN": "the-spawns-secret"}, bundleName: "default", instanceID: inst.InstanceID})
	back := overlayEnv(h.a.cfg.Env, envOverlay(h.a.cfg.Env, full))
	slices.Sort(full)
	slices.Sort(back)
	if !slices.Equal(full, back) {
		t.Errorf("the environment does not rebuild:\n%v\n%v", full, back)
	}
	c.roundTrip("l")
	for _, secret := range []string{"the-spawns-secret", "agents-own-secret"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("%s logged", secret)
		}
	}
}
