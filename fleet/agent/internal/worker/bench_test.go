//go:build unix

package worker

import (
	"strconv"
	"strings"
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

// BenchmarkUpdateLine reads one message_update line, the last one with
// one more character of text, of 1 KB and of 20 KB: "parse" is
// pirpc.ParseRecord, "grown" the worker's lineParser, which compares it
// with the last line instead.
func BenchmarkUpdateLine(b *testing.B) {
	for _, size := range []int{1_000, 20_000} {
		n := (size - 400) / 2                                                          // the text, twice, and the rest of the line
		lines := textStream(strings.Repeat("0123456789abcdef", size/16)[:n], n-1, nil) // start, two deltas, end
		var primed lineParser
		for _, l := range lines[:2] {
			if _, err := primed.parse(l); err != nil {
				b.Fatal(err)
			}
		}
		line := lines[2]
		if !primed.growing {
			b.Fatal("the second delta does not grow the first")
		}
		name := strconv.Itoa(size/1000) + "KB"
		b.Run("parse/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := pirpc.ParseRecord(line); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("grown/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				p := primed
				if _, err := p.parse(line); err != nil || !p.growing {
					b.Fatal(err)
				}
			}
		})
	}
}
