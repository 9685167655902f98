package scripted

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// The scripted model: the same directive language as
// testdata/pi/faux-provider.ts (see testdata/pi/README.md).

type blockKind int

const (
	blockText blockKind = iota
	blockThinking
	blockTool
)

type block struct {
	kind blockKind
	text string          // text and thinking
	tool string          // tool name
	args json.RawMessage // tool arguments
}

// plan is a whole reply, decided before anything streams.
type plan struct {
	blocks  []block
	delayMs int
	errMsg  string // non-empty: the reply ends with stopReason "error"
	failed  bool
}

var directive = regexp.MustCompile(`^(say|think|bash|write|read|tool|delay|error|fail):[ \t]?(.*)$`)

// fauxModel holds what the model remembers between calls: how many times
// each message met a "fail:" directive.
type fauxModel struct {
	failures map[string]int
}

func envNumber(name string, fallback float64) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(os.Getenv(name)), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return fallback
	}
	return v
}

func toolArgs(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// reply plans the answer to a context.
func (f *fauxModel) reply(context []*message) plan {
	p := plan{delayMs: int(envNumber("PIFLEET_FAUX_DELAY_MS", 0))}
	if len(context) == 0 {
		p.blocks = append(p.blocks, block{kind: blockText, text: "faux: (empty context)"})
		return p
	}
	last := context[len(context)-1]
	switch last.Role {
	case "toolResult":
		start := len(context) - 1
		for start > 0 && context[start-1].Role == "toolResult" {
			start--
		}
		var parts []string
		for _, m := range context[start:] {
			line, _, _ := strings.Cut(m.text(), "\n")
			if m.IsError {
				line = "ERROR: " + line
			}
			parts = append(parts, m.ToolName+"="+line)
		}
		p.blocks = append(p.blocks, block{kind: blockText, text: "faux: tool results: " + strings.Join(parts, "; ")})
		return p
	case "user", "bashExecution":
	default:
		p.blocks = append(p.blocks, block{kind: blockText, text: "faux: (nothing to answer)"})
		return p
	}

	text := last.llmText()
	var plain []string
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSuffix(strings.TrimLeft(raw, " \t"), "\r")
		m := directive.FindStringSubmatch(line)
		if m == nil {
			plain = append(plain, raw)
			continue
		}
		name, rest := m[1], m[2]
		switch name {
		case "say":
			p.blocks = append(p.blocks, block{kind: blockText, text: rest})
		case "think":
			p.blocks = append(p.blocks, block{kind: blockThinking, text: rest})
		case "bash":
			p.blocks = append(p.blocks, block{kind: blockTool, tool: "bash", args: toolArgs(map[string]string{"command": rest})})
		case "write":
			path, content, _ := strings.Cut(rest, " ")
			content = strings.ReplaceAll(content, `\n`, "\n")
			p.blocks = append(p.blocks, block{kind: blockTool, tool: "write", args: toolArgs(obj{{"path", path}, {"content", content}})})
		case "read":
			p.blocks = append(p.blocks, block{kind: blockTool, tool: "read", args: toolArgs(map[string]string{"path": strings.TrimSpace(rest)})})
		case "tool":
			name, argText, hasArgs := strings.Cut(rest, " ")
			args := json.RawMessage("{}")
			if hasArgs {
				var v map[string]any
				if json.Unmarshal([]byte(argText), &v) == nil {
					args = toolArgs(v)
				} else {
					args = toolArgs(map[string]string{"raw": argText})
				}
			}
			p.blocks = append(p.blocks, block{kind: blockTool, tool: name, args: args})
		case "delay":
			ms, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			p.delayMs = int(max(0, ms))
		case "error":
			p.errMsg, p.failed = rest, true
		case "fail":
			countText, msg, ok := strings.Cut(rest, " ")
			if !ok {
				msg = "faux failure"
			}
			n, _ := strconv.Atoi(countText)
			key := fmt.Sprintf("%d:%s", last.Timestamp, text)
			if f.failures[key] < n {
				f.failures[key]++
				p.errMsg, p.failed = msg, true
			}
		}
	}
	if len(p.blocks) == 0 && !p.failed {
		rest := strings.TrimSpace(strings.Join(plain, "\n"))
		if rest == "" {
			rest = text
		}
		p.blocks = append(p.blocks, block{kind: blockText, text: "faux: " + rest})
	}
	return p
}

// chunks splits s into pieces of size characters (at least one piece).
func chunks(s string, size int) []string {
	r := []rune(s) // JavaScript slices UTF-16 units; runes are close enough
	if len(r) == 0 {
		return []string{""}
	}
	var out []string
	for i := 0; i < len(r); i += size {
		out = append(out, string(r[i:min(i+size, len(r))]))
	}
	return out
}

// tokens estimates tokens like the faux provider: characters / 4, rounded up.
func tokens(chars int) int { return (chars + 3) / 4 }

// replyTail is the end of a context that reply reads: the trailing run of
// tool results, or else the last message.
func replyTail(context []*message) []*message {
	start := len(context) - 1
	for start > 0 && context[start].Role == "toolResult" && context[start-1].Role == "toolResult" {
		start--
	}
	return context[max(start, 0):]
}
