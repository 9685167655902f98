package pitest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFindSkipsWithoutPi(t *testing.T) {
	t.Setenv(EnvPi, "")
	var sub *testing.T
	t.Run("needs pi", func(t *testing.T) {
		sub = t
		Find(t)
		t.Error("Find did not skip")
	})
	if !sub.Skipped() {
		t.Fatal("the test was not skipped")
	}
	t.Setenv(EnvPi, filepath.Join(t.TempDir(), "no-such-pi"))
	t.Run("missing file", func(t *testing.T) {
		sub = t
		Find(t)
	})
	if !sub.Skipped() {
		t.Fatal("a PIFLEET_PI naming no file was not skipped")
	}
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
