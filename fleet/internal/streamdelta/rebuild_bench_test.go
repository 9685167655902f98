package streamdelta

import (
	"fmt"
	"strings"
	"testing"

	"example.com/pifleet/transport"
)

// answerLines is the message_start … message_end of text streamed in
// chunks of chunk characters, written as JSON.stringify writes them, as
// pi writes a text answer whose usage does not change while it streams
// (the fleet's scripted worker): every update after the first text_delta
// is coded as a short entry of its delta alone.
func answerLines(text string, chunk int) [][]byte {
	partial := func(s string) string {
		q := marshal(s)
		return `{"role":"assistant","content":[{"type":"text","text":` + string(q) + `}],"api":"anthropic-messages","provider":"anthropic","model":"claude-x",` +
			`"usage":{"input":12,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":12,"cost":{"input":0.0001,"output":0,"cacheRead":0,"cacheWrite":0,"total":0.0001}},"stopReason":"stop","timestamp":1795979568094}`
	}
	update := func(step, p string) []byte {
		return []byte(`{"type":"message_update","assistantMessageEvent":{` + step + `,"partial":` + p + `},"message":` + p + `}`)
	}
	lines := [][]byte{[]byte(`{"type":"message_start","message":` + partial("") + `}`),
		update(`"type":"text_start","contentIndex":0`, partial(""))}
	acc := ""
	for _, c := range chunks(text, chunk) {
		acc += c
		piece := marshal(c)
		lines = append(lines, update(`"type":"text_delta","contentIndex":0,"delta":`+string(piece), partial(acc)))
	}
	q := marshal(text)
	lines = append(lines, update(`"type":"text_end","contentIndex":0,"content":`+string(q), partial(text)))
	return append(lines, []byte(`{"type":"message_end","message":`+partial(text)+`}`))
}

// codedAnswer codes lines as an agent does for one connection, in frames
// of at most flush entries.
func codedAnswer(lines [][]byte, flush int) []*transport.EventDeltaFrame {
	var enc Encoder
	var ch Chain
	b := NewBatch("i-1")
	var out []*transport.EventDeltaFrame
	for i, l := range lines {
		c := enc.Encode(uint64(i+1), l)
		b.Add(&ch, &c)
		if b.Len() >= flush || i == len(lines)-1 {
			out = append(out, b.Frame())
		}
	}
	return out
}

// BenchmarkRebuild is what the server's Rebuilder does with the frames of
// one streamed answer, without writing any line out (a server whose
// consumers read only the steps): the work per update should be the
// update's chunk, not the answer so far.
func BenchmarkRebuild(b *testing.B) {
	for _, chunk := range []int{1, 16} {
		for _, size := range []int{2_000, 20_000} {
			b.Run(fmt.Sprintf("chunk%d/%dKB", chunk, size/1000), func(b *testing.B) {
				lines := answerLines(strings.Repeat("0123456789abcdef", size/16), chunk)
				frames := codedAnswer(lines, 64)
				var heads int
				for b.Loop() {
					rb := NewRebuilder(transport.MaxFrameBytes)
					for _, f := range frames {
						if err := rb.RebuildFrameLines(f, func(_ uint64, _ *Line, head []byte) { heads += len(head) }); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/update")
			})
		}
	}
}
