//go:build unix

package shim

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// BenchmarkRelayLines measures stdout lines relayed worker → shim → Client
// (200-byte lines, acknowledged every 256). The worker prints in batches of
// relayBatch lines so that a Client slower than the worker does not make the
// shim drop lines (it never holds the worker back). Compare
// BenchmarkRelayDirect.
func BenchmarkRelayLines(b *testing.B) {
	cfg := testConfig(b)
	c := startShim(b, cfg)
	b.SetBytes(200)
	b.ResetTimer()
	for seq := 1; seq <= b.N; {
		n := min(relayBatch, b.N-seq+1)
		write(b, c, "emit "+strconv.Itoa(n)+" 200")
		for end := seq + n; seq < end; seq++ {
			ev := next(b, c)
			if ev.Seq != uint64(seq) {
				b.Fatalf("got %v seq %d, want line %d", ev.Kind, ev.Seq, seq)
			}
			if seq%256 == 0 || seq == end-1 {
				c.Ack(ev.Seq)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	write(b, c, "exit 0")
	expectExit(b, c, cfg)
}

// relayBatch lines of 200 bytes stay well inside the default buffer.
const relayBatch = 20000

// BenchmarkRelayDirect is the baseline: the same worker read straight
// from its stdout pipe, split by the same line reader.
func BenchmarkRelayDirect(b *testing.B) {
	w := startDirect(b)
	b.SetBytes(200)
	b.ResetTimer()
	w.in.WriteString("emit " + strconv.Itoa(b.N) + " 200\n")
	w.in.Flush()
	for range b.N {
		if _, _, err := w.out.next(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkRoundTrip measures one Write of a command and the arrival of
// the line it makes the worker print, through the shim.
func BenchmarkRoundTrip(b *testing.B) {
	cfg := testConfig(b)
	c := startShim(b, cfg)
	cmd := []byte(`echo {"type":"response","command":"get_state","success":true}` + "\n")
	for b.Loop() {
		if err := c.Write(b.Context(), cmd); err != nil {
			b.Fatal(err)
		}
		c.Ack(next(b, c).Seq)
	}
	write(b, c, "exit 0")
	expectExit(b, c, cfg)
}

// BenchmarkRoundTripDirect is the baseline for BenchmarkRoundTrip: the
// same exchange over the worker's own pipes.
func BenchmarkRoundTripDirect(b *testing.B) {
	w := startDirect(b)
	cmd := `echo {"type":"response","command":"get_state","success":true}` + "\n"
	for b.Loop() {
		w.in.WriteString(cmd)
		w.in.Flush()
		if _, _, err := w.out.next(); err != nil {
			b.Fatal(err)
		}
	}
}

type directWorker struct {
	in  *bufio.Writer
	out *lineReader
}

func startDirect(b *testing.B) directWorker {
	cmd := exec.Command(os.Args[0], "fakeworker")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	return directWorker{in: bufio.NewWriter(stdin), out: newLineReader(stdout, DefaultMaxLine)}
}
