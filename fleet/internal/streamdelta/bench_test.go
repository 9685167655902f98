package streamdelta

import (
	"fmt"
	"strings"
	"testing"

	"example.com/pifleet/transport/pirpc"
)

// BenchmarkAgentLine is what the agent does with each line of a worker
// that streams an answer in 16-character chunks, before anything is sent:
// parse the record (pirpc.ParseRecord, which validates the untrusted
// line) and code it (Encoder.Encode). Every message_update carries the
// whole partial message twice, so a line is about twice the answer so
// far: the work per line should be a scan of it, not more.
func BenchmarkAgentLine(b *testing.B) {
	for _, size := range []int{2_000, 20_000, 200_000} {
		b.Run(fmt.Sprintf("%dKB", size/1000), func(b *testing.B) {
			s := newPiStream()
			s.start()
			s.text("text", strings.Repeat("0123456789abcdef", size/16), 16)
			s.end()
			lines := s.lines
			bytes := 0
			for _, l := range lines {
				bytes += len(l)
			}
			b.SetBytes(int64(bytes))
			for b.Loop() {
				var enc Encoder
				for i, l := range lines {
					if _, err := pirpc.ParseRecord(l); err != nil {
						b.Fatal(err)
					}
					enc.Encode(uint64(i+1), l)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
		})
	}
}

// BenchmarkEncodeText is the encoder alone on a text streamed as pi 0.73.1
// streams one (nothing but the text and the step change from one update
// to the next), coded by following its growth (grow) and by parsing every
// line (parse, as before the encoder followed growth).
func BenchmarkEncodeText(b *testing.B) {
	for _, c := range []struct {
		name        string
		size, chunk int
	}{{"1KB-by-1", 1_000, 1}, {"20KB-by-16", 20_000, 16}} {
		lines := growingText(strings.Repeat("0123456789abcdef", c.size/16+1)[:c.size], c.chunk, nil)
		for _, mode := range []string{"grow", "parse"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					enc := Encoder{parseAll: mode == "parse"}
					for i, l := range lines {
						enc.Encode(uint64(i+1), l)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
			})
		}
	}
}
