//go:build unix

package worker

import (
	"strconv"
	"testing"

	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport/pirpc"
)

// BenchmarkEventPath measures the worker's own cost per stdout line: parse,
// tally, settle detector, ring, delivery queue and the Events channel (no
// shim, no process).
func BenchmarkEventPath(b *testing.B) {
	w := newWorker(Spec{InstanceID: "i-000000000000"}.withDefaults())
	w.machine, _ = WorkerTable.Restore(StateIdle)
	done := make(chan struct{})
	go func() {
		for range w.Events() {
		}
		close(done)
	}()
	line := []byte(`{"type":"message_update","message":{"role":"assistant","content":[{"type":"text","text":"partial text of a reply"}]},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"text "}}`)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	var seq uint64
	for b.Loop() {
		rec, err := pirpc.ParseRecord(line)
		if err != nil {
			b.Fatal(err)
		}
		seq++
		w.mu.Lock()
		w.onEventLocked(nil, 0, seq, rec)
		w.mu.Unlock()
	}
	w.shutdown()
	<-done
}

// BenchmarkPromptSettle measures a prompt → settled round trip through the
// shim with the scripted worker (one text reply).
func BenchmarkPromptSettle(b *testing.B) {
	ps := pitest.Command(b, pitest.Scripted, pitest.Options{})
	w, err := Start(b.Context(), Spec{
		InstanceID:  "i-0000000000be",
		Cwd:         ps.Dir,
		Command:     append([]string{ps.Path}, ps.Args...),
		Env:         ps.Env,
		StateDir:    b.TempDir(),
		ShimCommand: []string{testBinary(), "shim"},
	})
	if err != nil {
		b.Fatal(err)
	}
	events := w.Events()
	n := 0
	for b.Loop() {
		n++
		if err := w.Send([]byte(`{"type":"prompt","message":"say: ok ` + strconv.Itoa(n) + `"}`)); err != nil {
			b.Fatal(err)
		}
		for ev := range events {
			if ev.Settled != nil {
				break
			}
		}
	}
	b.StopTimer()
	go func() {
		for range events {
		}
	}()
	if _, err := w.Stop(b.Context()); err != nil {
		b.Fatal(err)
	}
	<-w.Done()
}
