package scripted

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkPromptToAgentEnd measures, in process over real pipes, a
// prompt's round trip through the worker: the prompt written to stdin,
// agent_start and agent_end read from stdout, then a get_state (the
// client's settle barrier) and its response. It reports the p50 of each
// step besides the mean of the whole.
func BenchmarkPromptToAgentEnd(b *testing.B) {
	dir := b.TempDir()
	b.Chdir(dir)
	b.Setenv("HOME", dir)
	b.Setenv("PI_CODING_AGENT_DIR", dir)
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(`{"retry":{"enabled":true,"maxRetries":3,"baseDelayMs":10}}`), 0o644); err != nil {
		b.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	exited := make(chan int, 1)
	go func() {
		exited <- Main([]string{"--mode", "rpc", "--provider", "faux", "--model", "faux-1", "--session-dir", filepath.Join(dir, "sessions")},
			inR, outW, os.Stderr)
		outW.Close()
	}()
	out := bufio.NewReaderSize(outR, 1<<20)
	until := func(prefix string) {
		for {
			line, err := out.ReadSlice('\n')
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(line, []byte(prefix)) {
				return
			}
		}
	}
	var started, ended, answered []time.Duration
	for b.Loop() {
		t0 := time.Now()
		inW.Write([]byte(`{"type":"prompt","message":"say: ok"}` + "\n"))
		until(`"type":"agent_start"`)
		started = append(started, time.Since(t0))
		until(`"type":"agent_end"`)
		ended = append(ended, time.Since(t0))
		inW.Write([]byte(`{"id":"b","type":"get_state"}` + "\n"))
		until(`"command":"get_state"`)
		answered = append(answered, time.Since(t0))
	}
	b.StopTimer()
	inW.Close()
	<-exited
	for _, m := range []struct {
		unit string
		d    []time.Duration
	}{{"agent_start-p50-ns", started}, {"agent_end-p50-ns", ended}, {"get_state-p50-ns", answered}} {
		slices.Sort(m.d)
		b.ReportMetric(float64(m.d[len(m.d)/2].Nanoseconds()), m.unit)
	}
}
