package streamdelta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ordered is a JSON object whose keys keep their order, as
// JSON.stringify writes pi's objects.
type ordered []kv

type kv struct {
	k string
	v any
}

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(marshal(e.k))
		b.WriteByte(':')
		b.Write(marshal(e.v))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as JSON.stringify
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func (o ordered) with(k string, v any) ordered {
	out := make(ordered, 0, len(o)+1)
	done := false
	for _, e := range o {
		if e.k == k {
			e.v, done = v, true
		}
		out = append(out, e)
	}
	if !done {
		out = append(out, kv{k, v})
	}
	return out
}

func (o ordered) without(k string) ordered {
	out := make(ordered, 0, len(o))
	for _, e := range o {
		if e.k != k {
			out = append(out, e)
		}
	}
	return out
}

// piStream writes events the way pi 0.73.1 streams an assistant message
// (agent-loop.js, providers/anthropic.js): every message_update carries
// the partial message as assistantMessageEvent.partial and again as
// message.
type piStream struct {
	lines   [][]byte
	turn    []json.RawMessage // the messages finished in this turn
	run     []json.RawMessage // ... and in this run
	content []ordered
	usage   ordered
	extra   ordered // stopReason, errorMessage, … after the fixed fields
}

func newPiStream() *piStream {
	s := &piStream{}
	s.usage = ordered{{"input", 12}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}, {"totalTokens", 12},
		{"cost", ordered{{"input", 0.0001}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}, {"total", 0.0001}}}}
	s.extra = ordered{{"stopReason", "stop"}, {"timestamp", 1795979568094}}
	return s
}

func (s *piStream) partial() ordered {
	content := make([]any, len(s.content))
	for i, c := range s.content {
		content[i] = c
	}
	m := ordered{{"role", "assistant"}, {"content", content}, {"api", "anthropic-messages"}, {"provider", "anthropic"},
		{"model", "claude-x"}, {"usage", s.usage}}
	return append(m, s.extra...)
}

func (s *piStream) update(step ordered) {
	p := s.partial()
	line := ordered{{"type", "message_update"}, {"assistantMessageEvent", append(step, kv{"partial", p})}, {"message", p}}
	s.lines = append(s.lines, marshal(line))
}

func (s *piStream) event(v ordered) { s.lines = append(s.lines, marshal(v)) }

func (s *piStream) start() {
	s.content = nil
	s.event(ordered{{"type", "message_start"}, {"message", s.partial()}})
}

func (s *piStream) end() {
	m := json.RawMessage(marshal(s.partial()))
	s.finished(m)
	s.event(ordered{{"type", "message_end"}, {"message", m}})
}

func (s *piStream) finished(m json.RawMessage) {
	s.turn = append(s.turn, m)
	s.run = append(s.run, m)
}

// user writes a user message's start and end, as pi does for a prompt.
func (s *piStream) user(text string) {
	m := json.RawMessage(marshal(ordered{{"role", "user"}, {"content", []any{ordered{{"type", "text"}, {"text", text}}}}, {"timestamp", 1795979567000}}))
	s.event(ordered{{"type", "message_start"}, {"message", m}})
	s.finished(m)
	s.event(ordered{{"type", "message_end"}, {"message", m}})
}

// toolResult writes a tool result message, as pi does after a tool ran.
func (s *piStream) toolResult(id, output string) {
	m := json.RawMessage(marshal(ordered{{"role", "toolResult"}, {"toolCallId", id}, {"toolName", "bash"},
		{"content", []any{ordered{{"type", "text"}, {"text", output}}}}, {"isError", false}, {"timestamp", 1795979567500}}))
	s.event(ordered{{"type", "message_start"}, {"message", m}})
	s.finished(m)
	s.event(ordered{{"type", "message_end"}, {"message", m}})
}

// turnEnd writes turn_end: the turn's assistant message (the first one
// finished after the user's) and its tool results, again.
func (s *piStream) turnEnd() {
	var msg json.RawMessage
	results := []json.RawMessage{}
	for _, m := range s.turn {
		switch {
		case strings.HasPrefix(string(m), `{"role":"assistant"`):
			msg = m
		case strings.HasPrefix(string(m), `{"role":"toolResult"`):
			results = append(results, m)
		}
	}
	s.event(ordered{{"type", "turn_end"}, {"message", msg}, {"toolResults", results}})
	s.turn = nil
}

// agentEnd writes agent_end: every message of the run, again.
func (s *piStream) agentEnd() {
	s.event(ordered{{"type", "agent_end"}, {"messages", s.run}})
	s.run, s.turn = nil, nil
}

// text streams a text (or thinking) block in chunks of n characters.
func (s *piStream) text(kind, text string, n int) {
	field := map[string]string{"text": "text", "thinking": "thinking"}[kind]
	i := len(s.content)
	s.content = append(s.content, ordered{{"type", kind}, {field, ""}})
	s.update(ordered{{"type", kind + "_start"}, {"contentIndex", i}})
	acc := ""
	for _, chunk := range chunks(text, n) {
		acc += chunk
		s.content[i] = s.content[i].with(field, acc)
		if kind == "thinking" {
			// The signature grows without an event of its own.
			s.content[i] = s.content[i].with("thinkingSignature", strings.Repeat("s", len(acc)/8))
		}
		s.usage = s.usage.with("output", len(acc)/4)
		s.update(ordered{{"type", kind + "_delta"}, {"contentIndex", i}, {"delta", chunk}})
	}
	s.update(ordered{{"type", kind + "_end"}, {"contentIndex", i}, {"content", acc}})
}

// toolCall streams a tool call's arguments as JSON source, with the
// arguments parsed so far beside it.
func (s *piStream) toolCall(id, name string, args ordered, n int) {
	i := len(s.content)
	block := ordered{{"type", "toolCall"}, {"id", id}, {"name", name}, {"arguments", ordered{}}, {"partialJson", ""}, {"index", i}}
	s.content = append(s.content, block)
	s.update(ordered{{"type", "toolcall_start"}, {"contentIndex", i}})
	src := string(marshal(args))
	acc := ""
	for _, chunk := range chunks(src, n) {
		acc += chunk
		var parsed any = ordered{}
		if json.Valid([]byte(acc)) {
			parsed = json.RawMessage(acc)
		} else if k := strings.LastIndex(acc, `,"`); k > 0 {
			parsed = json.RawMessage(acc[:k] + "}")
			if !json.Valid(parsed.(json.RawMessage)) {
				parsed = ordered{}
			}
		}
		s.content[i] = s.content[i].with("arguments", parsed).with("partialJson", acc)
		s.update(ordered{{"type", "toolcall_delta"}, {"contentIndex", i}, {"delta", chunk}})
	}
	s.content[i] = s.content[i].with("arguments", args).without("partialJson").without("index")
	s.update(ordered{{"type", "toolcall_end"}, {"contentIndex", i}, {"toolCall", s.content[i]}})
}

func chunks(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}

// answer is a text of n characters with what JSON escapes, multi-byte
// characters and a surrogate pair cut between chunks.
func answer(n int) string {
	const words = "Ünïcode “quotes” \"escaped\" back\\slash tab\t newline\n <html>&amp; 🚀 emoji line\u2028sep plain words "
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < n {
		b.WriteString(words)
	}
	return string([]rune(b.String())[:n])
}

// scriptedStream is one prompt's worth of pi output: thinking, text, two
// tool calls, tool events between messages, a second message that ends in
// an error mid-stream, and an aborted third.
func scriptedStream() [][]byte {
	s := newPiStream()
	s.event(ordered{{"type", "agent_start"}})
	s.user("write a/b.go, " + answer(120))
	s.start()
	s.text("thinking", "Let me think about this carefully; the user wants \"x\".", 7)
	s.text("text", answer(300), 16)
	s.toolCall("toolu_1", "write", ordered{{"path", "a/b.go"}, {"content", answer(200)}}, 16)
	s.toolCall("toolu_2", "bash", ordered{{"command", "go test ./..."}, {"timeout", 60}}, 5)
	s.extra = s.extra.with("stopReason", "toolUse")
	s.end()
	s.event(ordered{{"type", "tool_execution_start"}, {"toolCallId", "toolu_1"}, {"toolName", "write"}})
	s.event(ordered{{"type", "tool_execution_end"}, {"toolCallId", "toolu_1"}, {"toolName", "write"}, {"isError", false}})
	s.toolResult("toolu_1", "Successfully wrote 200 bytes to a/b.go")
	s.toolResult("toolu_2", answer(70))
	s.turnEnd()
	s.extra = s.extra.with("stopReason", "stop")
	s.start()
	s.text("text", answer(90), 16)
	// An interleaved event of another kind, mid-message.
	s.event(ordered{{"type", "queue_update"}, {"steering", []string{"hurry"}}, {"followUp", []string{}}})
	s.text("text", "second block", 4)
	// The provider fails mid-stream: pi drops the scratch fields and
	// reports the error on the partial message.
	s.extra = s.extra.with("stopReason", "error").with("errorMessage", "overloaded_error: 529")
	s.update(ordered{{"type", "text_delta"}, {"contentIndex", 1}, {"delta", ""}})
	s.end()
	s.extra = ordered{{"stopReason", "stop"}, {"timestamp", 1795979569000}}
	s.start()
	s.text("text", answer(40), 16)
	s.extra = s.extra.with("stopReason", "aborted").with("errorMessage", "Request was aborted")
	s.end()
	s.turnEnd()
	s.agentEnd()
	// A second run: what the first one held is gone.
	s.event(ordered{{"type", "agent_start"}})
	s.user("again")
	s.extra = ordered{{"stopReason", "stop"}, {"timestamp", 1795979570000}}
	s.start()
	s.text("text", answer(60), 16)
	s.end()
	s.turnEnd()
	s.agentEnd()
	return s.lines
}

func eventType(line []byte) string {
	var h struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(line, &h)
	return h.Type
}

var _ = fmt.Sprint
