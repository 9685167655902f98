// Package answertest streams an assistant's answer the way the fleet
// holds it for the control API's tests and benchmarks: each event a Line
// rebuilt from what a pifleet agent sends (event_delta entries), so that
// updates are written out only when read and tell their delta after the
// event before them, as fleet.Event does.
package answertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/transport"
)

// Event is one event of the answer: its pi type and its line.
type Event struct {
	Type string
	Line *streamdelta.Line
}

// Text is an answer of n characters.
func Text(n int) string {
	return string(bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n])
}

// Answer streams text in chunks of chunk characters (runes): message_start,
// text_start, one text_delta per chunk, text_end and message_end, as pi
// writes them (JSON.stringify: no HTML escapes), rebuilt as a server
// rebuilds them from the entries an agent sends. Building them costs
// O(len(text)): no whole update is written out here.
func Answer(instanceID, text string, chunk int) []Event {
	msg := func(content string) string {
		return `{"role":"assistant","content":[` + content + `],"api":"anthropic-messages","provider":"anthropic","model":"claude-test","stopReason":"stop","timestamp":1764650000000}`
	}
	var textBody []byte
	var chunks []string
	for r := []rune(text); len(r) > 0; r = r[min(chunk, len(r)):] {
		chunks = append(chunks, string(r[:min(chunk, len(r))]))
	}
	block := func(body []byte) string { return `{"type":"text","text":"` + string(body) + `"}` }
	update := func(step, partial string) string {
		return `{"type":"message_update","assistantMessageEvent":{` + step + `,"partial":` + partial + `},"message":` + partial + `}`
	}
	whole := func(line string) string { return `{"e":` + line + `}` }
	start := msg("")
	entries := []string{
		whole(`{"type":"message_start","message":` + start + `}`),
		whole(update(`"type":"text_start","contentIndex":0`, msg(block(nil)))),
	}
	types := []string{"message_start", "message_update"}
	for i, c := range chunks {
		d := escape(c)
		textBody = append(textBody, d...)
		if i == 0 {
			entries = append(entries, `{"u":{"type":"text_delta","contentIndex":0,"delta":"`+string(d)+`"},"o":[[[1,0,1],"d"]]}`)
		} else {
			entries = append(entries, `["`+string(d)+`"]`)
		}
		types = append(types, "message_update")
	}
	final := msg(block(textBody))
	entries = append(entries,
		`{"u":{"type":"text_end","contentIndex":0,"content":null},"o":[],"r":[[2,[1,0,1]]]}`,
		whole(`{"type":"message_end","message":`+final+`}`))
	types = append(types, "message_update", "message_end")

	rb := streamdelta.NewRebuilder(transport.MaxFrameBytes)
	var out []Event
	for i, e := range entries {
		seq := uint64(i + 1)
		var base *uint64
		if !strings.HasPrefix(e, `{"e":`) {
			b := seq - 1
			base = &b
		}
		err := rb.RebuildLines(instanceID, seq, base, []byte("["+e+"]"), func(_ uint64, l *streamdelta.Line, _ []byte) {
			out = append(out, Event{Type: types[i], Line: l})
		})
		if err != nil {
			panic(fmt.Sprintf("answertest: entry %d %.200s: %v", i, e, err))
		}
	}
	return out
}

// escape is s's body as a JSON string, as JSON.stringify writes it.
func escape(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	return out[1 : len(out)-1]
}
