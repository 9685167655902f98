package fleet

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/transport"
)

// streamedSteps is a message streamed with the steps given (each an
// assistantMessageEvent without its partial, its delta appended to the
// text), between a text_start and a message_end.
func streamedSteps(steps []string, deltas []string) [][]byte {
	partial := func(text string) string {
		q, _ := json.Marshal(text)
		return `{"role":"assistant","content":[{"type":"text","text":` + string(q) + `}],"stopReason":"stop"}`
	}
	update := func(step, p string) []byte {
		return []byte(`{"type":"message_update","assistantMessageEvent":{` + step + `,"partial":` + p + `},"message":` + p + `}`)
	}
	lines := [][]byte{[]byte(`{"type":"message_start","message":` + partial("") + `}`), update(`"type":"text_start","contentIndex":0`, partial(""))}
	text := ""
	for i, step := range steps {
		var s string
		_ = json.Unmarshal([]byte(deltas[i]), &s)
		text += s
		lines = append(lines, update(step, partial(text)))
	}
	return append(lines, []byte(`{"type":"message_end","message":`+partial(text)+`}`))
}

// A rebuilt update whose step is the last one's with another delta gets
// that one's record with the delta decoded (stepAfter), not a parse of
// its head: the record must be the parse's, field for field, and any
// step a decoder could read otherwise is parsed.
func TestStepAfterIsTheHeadsParse(t *testing.T) {
	// Deltas that are plain strings, escaped ones (decoded as the parse
	// decodes them), invalid UTF-8 and ones the agent codes otherwise.
	deltas := []string{`"a"`, `"b c"`, `"é🚀"`, `"\n"`, `"d"`, `"\"q\""`, `"e"`, `"\u2028"`, `"f"`, "\"\xff\"", `"x"`, `"\u0041"`, `""`, `"yz"`}
	for _, tc := range []struct {
		name string
		step string // with %s for the delta
		fast bool   // whether most updates take stepAfter
	}{
		{"text", `"type":"text_delta","contentIndex":0,"delta":%s`, true},
		{"delta first", `"delta":%s,"type":"text_delta","contentIndex":0`, true},
		{"another Delta", `"type":"text_delta","contentIndex":0,"delta":%s,"Delta":"other"`, false},
		{"an escaped delta", `"type":"text_delta","contentIndex":0,"delta":%s,"delt\u0061":"other"`, false},
		{"an index that does not decode", `"type":"text_delta","contentIndex":"zero","delta":%s`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []string
			for _, d := range deltas {
				steps = append(steps, strings.Replace(tc.step, "%s", d, 1))
			}
			lines := streamedSteps(steps, deltas)
			var enc streamdelta.Encoder
			var ch streamdelta.Chain
			b := streamdelta.NewBatch("i-1")
			for i, l := range lines {
				c := enc.Encode(uint64(i+1), l)
				b.Add(&ch, &c)
			}
			rb := streamdelta.NewRebuilder(transport.MaxFrameBytes)
			var last lastStep
			fast, heads := 0, 0
			if err := rb.RebuildFrameLines(b.Frame(), func(_ uint64, line *streamdelta.Line, head []byte) {
				if head == nil {
					last = lastStep{}
					return
				}
				heads++
				want := &rebuiltEvent{line: line}
				if !want.parseHead(head) {
					t.Fatalf("head %s does not parse", head)
				}
				got := &rebuiltEvent{line: line}
				if got.stepAfter(last, head) {
					fast++
					if d := cmp.Diff(want.rec, got.rec); d != "" {
						t.Fatalf("stepAfter's record of %s differs from the parse's (-parse +stepAfter):\n%s", head, d)
					}
				}
				last = lastStep{line: line, rec: want.rec}
			}); err != nil {
				t.Fatal(err)
			}
			if heads != len(deltas)+1 {
				t.Fatalf("%d heads of %d updates", heads, len(deltas)+1)
			}
			// "b c" … "f", escaped or not (after them, the agent codes long
			// entries).
			if tc.fast && fast != 8 {
				t.Fatalf("%d updates took stepAfter, want 8", fast)
			}
			if !tc.fast && fast != 0 {
				t.Fatalf("%d updates took stepAfter", fast)
			}
		})
	}
}
