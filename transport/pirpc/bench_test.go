package pirpc

import (
	"bytes"
	"io"
	"os"
	"testing"
)

func transcript(b *testing.B) [][]byte {
	raw, err := os.ReadFile("testdata/pi-0.73.1-transcript.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
}

// BenchmarkParseRecord parses the lines of a real pi transcript (mostly
// message_update events carrying partial messages).
func BenchmarkParseRecord(b *testing.B) {
	lines := transcript(b)
	var size int64
	for _, l := range lines {
		size += int64(len(l))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			if _, err := ParseRecord(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(lines)*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkLineReader splits the transcript into records.
func BenchmarkLineReader(b *testing.B) {
	raw, err := os.ReadFile("testdata/pi-0.73.1-transcript.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		lr := NewLineReader(bytes.NewReader(raw), 0)
		for {
			if _, err := lr.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkClientLines pushes the transcript through a Client (reader
// goroutine, parse, settle detector, queue, Lines) over a pipe.
func BenchmarkClientLines(b *testing.B) {
	raw, err := os.ReadFile("testdata/pi-0.73.1-transcript.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	n := bytes.Count(raw, []byte("\n"))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		outR, outW := io.Pipe()
		c := NewClient(io.Discard, outR, Options{DisableSettle: true})
		go func() {
			outW.Write(raw)
			outW.Close()
		}()
		got := 0
		for range c.Lines() {
			got++
		}
		if got < n-5 { // a few lines of the transcript are responses to pipelined commands
			b.Fatalf("%d of %d lines", got, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "lines/s")
}
