//go:build unix

package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// countingPi is a pi wrapper that logs each start (one line per process,
// "probe" for a --no-session model probe, else "worker") and holds every
// probe at a gate until the test opens it.
type countingPi struct {
	path, log, gate string
}

func newCountingPi(t testing.TB, real string) *countingPi {
	t.Helper()
	dir := t.TempDir()
	c := &countingPi{path: filepath.Join(dir, "pi"), log: filepath.Join(dir, "starts.log")}
	c.gate = mkfifo(t, dir, "gate")
	c.write(t, real)
	return c
}

// write (re)writes the wrapper around real.
func (c *countingPi) write(t testing.TB, real string) {
	t.Helper()
	script := fmt.Sprintf(`#!/bin/sh
case " $* " in
*" --no-session "*) echo probe >>%[1]q; read go <%[2]q ;;
*) echo worker >>%[1]q ;;
esac
exec %[3]q "$@"
`, c.log, c.gate, real)
	if err := os.WriteFile(c.path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// starts counts the probes and workers started so far.
func (c *countingPi) starts(t testing.TB) (probes, workers int) {
	t.Helper()
	b, err := os.ReadFile(c.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, l := range strings.Fields(string(b)) {
		if l == "probe" {
			probes++
		} else {
			workers++
		}
	}
	return probes, workers
}

// probeHarness is an agent whose pi is wrapped in a countingPi, with the
// bundle spawn needs: the scripted worker with bundle "default", or the
// real pi with bundle "faux" served over HTTP. joined receives one value
// each time a spawn waits for a probe another spawn started.
type probeHarness struct {
	*harness
	pi     *countingPi
	bundle string
	env    map[string]string
	joined chan struct{}
}

func newProbeHarness(t *testing.T, kind pitest.Kind, mod func(*Config)) *probeHarness {
	t.Helper()
	ph := &probeHarness{joined: make(chan struct{}, 64)}
	var h *harness
	switch kind {
	case pitest.RealPi:
		piPath := pitest.Find(t)
		ph.pi = newCountingPi(t, piPath)
		var srv *httptest.Server
		h, srv = realPiHarnessWith(t, hopts{noRun: true, mod: func(c *Config) {
			c.PiCommand = []string{ph.pi.path}
			if mod != nil {
				mod(c)
			}
		}})
		ph.bundle = "faux"
		ph.env = map[string]string{"PI_FLEET_SERVER": srv.URL}
	default:
		ph.pi = newCountingPi(t, pitest.ScriptedWorker(t))
		h = newHarness(t, hopts{worker: []string{ph.pi.path}, noRun: true, mod: mod})
		ph.bundle = "default"
	}
	h.a.models.joined = func() { ph.joined <- struct{}{} }
	h.run()
	ph.harness = h
	return ph
}

func (ph *probeHarness) spawnFrame(id string) *transport.SpawnFrame {
	f := &transport.SpawnFrame{Cwd: ph.cwd, Bundle: ph.bundle, Env: ph.env}
	f.ID = id
	return f
}

// waitJoined waits until n spawns joined a running probe.
func (ph *probeHarness) waitJoined(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-ph.joined:
		case <-time.After(waitLimit):
			t.Fatalf("fewer than %d spawns joined the probe within %s", n, waitLimit)
		}
	}
}

// Issue #20: concurrent spawns that name a model share one probe, and the
// next ones use its answer: 8 concurrent spawns start 8 workers and 1
// probe, 8 more start 8 workers and no probe.
func TestConcurrentSpawnsShareOneModelProbe(t *testing.T) {
	for _, kind := range pitest.Kinds() {
		t.Run(kind.String(), func(t *testing.T) {
			ph := newProbeHarness(t, kind, nil)
			c := ph.dial(t)
			c.hello()
			round := func(r string, gated bool) {
				for i := range 8 {
					c.send(ph.spawnFrame(fmt.Sprintf("%s-%d", r, i)))
				}
				if gated {
					ph.waitJoined(t, 7) // the one that started it, and seven more
					release(t, ph.pi.gate)
				}
				pending := map[string]bool{}
				for i := range 8 {
					pending[fmt.Sprintf("%s-%d", r, i)] = true
				}
				for len(pending) > 0 { // the answers come in any order
					f := c.next(func(f transport.Frame) bool { return pending[f.Envelope().ID] }, "the spawns' answers")
					delete(pending, f.Envelope().ID)
					switch f := f.(type) {
					case *transport.SpawnedFrame:
						if f.Instance.Model == nil || f.Instance.Model.ID != "faux-1" {
							t.Errorf("%s: model %+v", f.ID, f.Instance.Model)
						}
					case *transport.SpawnErrorFrame:
						t.Fatalf("%s refused: %s: %s", f.ID, f.Code, f.Message)
					}
				}
			}
			round("a", true)
			if p, w := ph.pi.starts(t); p != 1 || w != 8 {
				t.Fatalf("8 concurrent spawns started %d probes and %d workers, want 1 and 8", p, w)
			}
			round("b", false)
			if p, w := ph.pi.starts(t); p != 1 || w != 16 {
				t.Fatalf("after 8 more spawns: %d probes and %d workers, want 1 and 16", p, w)
			}
		})
	}
}

// #16 defect 8: a spawn whose connection drops while it waits for the
// model probe says so (not "no answer within 30s"), and the probe goes on
// for the others: the next spawn uses its answer.
func TestSpawnCancelledByDroppedConnectionSaysSo(t *testing.T) {
	var logs syncBuffer
	ph := newProbeHarness(t, pitest.Scripted, func(c *Config) {
		c.Logger = zerolog.New(&logs)
	})
	first := ph.dial(t)
	first.hello()
	second := ph.dial(t)
	second.hello()
	first.send(ph.spawnFrame("dropped"))
	second.send(ph.spawnFrame("waits"))
	ph.waitJoined(t, 1)
	first.close()
	logs.waitFor(t, "spawn refused") // the dropped spawn's wait ended
	release(t, ph.pi.gate)
	if _, ok := second.reply("waits").(*transport.SpawnedFrame); !ok {
		t.Fatal("the spawn that kept waiting was refused")
	}
	second.mustSpawn("after", ph.cwd, ph.bundle, nil)
	log := logs.String()
	for _, want := range []string{"spawn cancelled after waiting", "for the model probe", "the connection from", "closed"} {
		if !strings.Contains(log, want) {
			t.Errorf("refusal does not say %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "no answer") || strings.Contains(log, CodeModelProbeFailed) {
		t.Errorf("a cancelled spawn is reported as a failed probe:\n%s", log)
	}
	if p, w := ph.pi.starts(t); p != 1 || w != 2 {
		t.Errorf("%d probes and %d workers, want 1 and 2", p, w)
	}
}

// A probe that never answers fails after the probe timeout, saying so;
// failures are not kept, so the next spawn probes again.
func TestModelProbeTimeoutSaysHowLong(t *testing.T) {
	ph := newProbeHarness(t, pitest.Scripted, func(c *Config) { c.ProbeTimeout = 300 * time.Millisecond })
	c := ph.dial(t)
	c.hello()
	for i := range 2 {
		f, ok := c.spawn(fmt.Sprint("s", i), ph.cwd, ph.bundle, nil).(*transport.SpawnErrorFrame)
		if !ok {
			t.Fatalf("spawn %d with a deaf probe was not refused", i)
		}
		if f.Code != CodeModelProbeFailed || !strings.Contains(f.Message, "pi gave no answer within 300ms") {
			t.Errorf("spawn %d: %s: %s", i, f.Code, f.Message)
		}
	}
	if p, w := ph.pi.starts(t); p != 2 || w != 0 {
		t.Errorf("%d probes and %d workers, want 2 and 0", p, w)
	}
}

// A kept answer holds until pi or its configuration changes: a new auth
// file or a new pi binary mean a new probe.
func TestModelProbeKeptUntilPiOrAuthChanges(t *testing.T) {
	ph := newProbeHarness(t, pitest.Scripted, nil)
	c := ph.dial(t)
	c.hello()
	n := 0
	spawn := func(gated bool) {
		t.Helper()
		n++
		id := fmt.Sprint("s", n)
		c.send(ph.spawnFrame(id))
		if gated {
			release(t, ph.pi.gate)
		}
		if f, ok := c.reply(id).(*transport.SpawnErrorFrame); ok {
			t.Fatalf("spawn %s refused: %s: %s", id, f.Code, f.Message)
		}
	}
	probes := func(want int) {
		t.Helper()
		if p, _ := ph.pi.starts(t); p != want {
			t.Fatalf("after %d spawns: %d probes, want %d", n, p, want)
		}
	}
	spawn(true)
	spawn(false)
	probes(1)
	if err := os.WriteFile(filepath.Join(ph.agentDir, "auth.json"), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	spawn(true)
	spawn(false)
	probes(2)
	ph.pi.write(t, pitest.ScriptedWorker(t)) // the same wrapper, a new file
	os.Chtimes(ph.pi.path, time.Now(), time.Now().Add(time.Hour))
	spawn(true)
	probes(3)
}

// The probe's own errors say what happened: pi refused, or pi ended (and
// what it wrote), or the agent shut down.
func TestModelProbeErrorsSayWhatHappened(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) []string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return []string{p}
	}
	refuses := script("refuses", `read line; echo '{"type":"response","id":"pifleet-probe","command":"get_available_models","success":false,"error":"no auth for provider x"}'`)
	dies := script("dies", `echo "cannot load extension ext.ts" >&2; exit 3`)
	silent := script("silent", `exit 0`)
	hangs := script("hangs", `exec sleep 600`)
	for _, tc := range []struct {
		name string
		argv []string
		ctx  func() context.Context
		want string
	}{
		{"refused", refuses, nil, "pi refused get_available_models: no auth for provider x"},
		{"died", dies, nil, "pi ended without answering (exit status 3): cannot load extension ext.ts"},
		{"silent", silent, nil, "pi ended without answering (exit status 0) and wrote nothing on stderr"},
		{"shutdown", hangs, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, "the agent shut down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			_, err := probeModels(ctx, waitLimit, tc.argv, os.Environ(), dir)
			if !errors.Is(err, ErrProbe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}
