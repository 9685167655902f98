package pitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestFindSkipsWithoutPi(t *testing.T) {
	t.Setenv(EnvPi, "")
	if got := runFind(t); !got.skipped || got.failed {
		t.Errorf("without PIFLEET_PI: %+v, want a skip", got)
	}
	t.Setenv(EnvPi, filepath.Join(t.TempDir(), "no-such-pi"))
	if got := runFind(t); !got.failed || got.skipped || !strings.Contains(got.msg, "no-such-pi") {
		t.Errorf("PIFLEET_PI naming no file: %+v, want a failure naming it", got)
	}
	pi := filepath.Join(t.TempDir(), "pi")
	if err := os.WriteFile(pi, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvPi, pi)
	if got := runFind(t); got.failed || got.skipped || got.path != pi {
		t.Errorf("PIFLEET_PI naming a file: %+v", got)
	}
}

// findOutcome is what Find did to a test.
type findOutcome struct {
	failed, skipped bool
	msg, path       string
}

// recordingTB stands in for a test so that Find's skip or failure can be
// observed without ending this test.
type recordingTB struct {
	testing.TB
	out *findOutcome
}

func (r recordingTB) Helper() {}
func (r recordingTB) Skip(args ...any) {
	r.out.skipped, r.out.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (r recordingTB) Skipf(format string, args ...any) { r.Skip(fmt.Sprintf(format, args...)) }
func (r recordingTB) Fatalf(format string, args ...any) {
	r.out.failed, r.out.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runFind(t *testing.T) findOutcome {
	var out findOutcome
	done := make(chan struct{})
	go func() {
		defer close(done)
		out.path = Find(recordingTB{TB: t, out: &out})
	}()
	<-done
	return out
}

func TestMain(m *testing.M) {
	AnnounceSkips()
	goleak.VerifyTestMain(m)
}

func TestScriptedWorkerIsBuiltOnce(t *testing.T) {
	a := ScriptedWorker(t)
	b := ScriptedWorker(t)
	if a != b {
		t.Fatalf("two builds: %s, %s", a, b)
	}
	if st, err := os.Stat(a); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("%s: %v", a, err)
	}
}

func TestCommandIsIsolatedAndOffline(t *testing.T) {
	t.Setenv("PI_CODING_AGENT_DIR", "/somewhere/real")
	t.Setenv("ANTHROPIC_API_KEY", "sk-real")
	t.Setenv("PIFLEET_FAUX_COST", "9")
	s := Command(t, Scripted, Options{Env: []string{"PIFLEET_FAUX_COST=1"}})
	get := func(key string) []string {
		var vals []string
		for _, kv := range s.Env {
			if k, v, _ := strings.Cut(kv, "="); k == key {
				vals = append(vals, v)
			}
		}
		return vals
	}
	if got := get("PI_CODING_AGENT_DIR"); !slices.Equal(got, []string{s.AgentDir}) {
		t.Errorf("PI_CODING_AGENT_DIR %v", got)
	}
	if got := get("HOME"); len(got) != 1 || !strings.HasPrefix(got[0], s.AgentDir) {
		t.Errorf("HOME %v", got)
	}
	if got := get("PI_OFFLINE"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("PI_OFFLINE %v", got)
	}
	if got := get("ANTHROPIC_API_KEY"); got != nil {
		t.Errorf("a real key leaked into the worker's environment")
	}
	if got := get("PIFLEET_FAUX_COST"); !slices.Equal(got, []string{"1"}) {
		t.Errorf("PIFLEET_FAUX_COST %v", got)
	}
	if b, err := os.ReadFile(filepath.Join(s.AgentDir, "settings.json")); err != nil || string(b) != DefaultSettings {
		t.Errorf("settings.json %q %v", b, err)
	}
	if i := slices.Index(s.Args, "--session-dir"); i < 0 || s.Args[i+1] != s.SessionDir {
		t.Errorf("args %v", s.Args)
	}
}

// BenchmarkStartup measures spawn → first get_state answer.
func BenchmarkStartup(b *testing.B) {
	for _, kind := range Kinds() {
		b.Run(kind.String(), func(b *testing.B) {
			if kind == RealPi {
				Find(b)
			}
			ctx := context.Background()
			for b.Loop() {
				w := Start(b, kind, Options{NoSession: true})
				if _, err := w.Client.GetState(ctx); err != nil {
					b.Fatal(err)
				}
				w.Stop(b)
			}
		})
	}
}

// Without PIFLEET_PI, a verbose run (what CI logs keep) says once that the
// real-pi tests were skipped: this package's test binary is run again,
// verbose, with PIFLEET_PI unset.
func TestSkipNoticeReachesTheTestOutput(t *testing.T) {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvPi+"=") {
			env = append(env, kv)
		}
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.v", "-test.run=^$")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if n := strings.Count(string(out), SkipNotice); n != 1 {
		t.Fatalf("the notice appears %d times in the verbose output:\n%s", n, out)
	}
}
