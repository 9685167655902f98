package scripted

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// part is one content block.
type part struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// encoded, when set, is Text or Thinking (whichever is set) already
	// written as a JSON string: a streamed block's text, encoded a chunk
	// at a time as it grows instead of whole at every update.
	encoded []byte
}

// appendJSON appends the part as json.Marshal writes it.
func (p part) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"type":`...)
	b = appendString(b, p.Type)
	if p.Text != nil {
		b = p.appendText(append(b, `,"text":`...), *p.Text)
	}
	if p.Thinking != nil {
		b = p.appendText(append(b, `,"thinking":`...), *p.Thinking)
	}
	if p.ID != "" {
		b = appendString(append(b, `,"id":`...), p.ID)
	}
	if p.Name != "" {
		b = appendString(append(b, `,"name":`...), p.Name)
	}
	if len(p.Arguments) > 0 {
		args, err := json.Marshal(p.Arguments) // compacted and escaped, as Marshal does
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"arguments":`...), args...)
	}
	return append(b, '}'), nil
}

// appendText appends s, the part's text or thinking, as a JSON string.
func (p part) appendText(b []byte, s string) []byte {
	if p.encoded != nil {
		return append(b, p.encoded...)
	}
	return appendString(b, s)
}

func textPart(s string) part     { return part{Type: "text", Text: &s} }
func thinkingPart(s string) part { return part{Type: "thinking", Thinking: &s} }

// message is an agent message; MarshalJSON writes each role's fields in
// pi's order.
type message struct {
	Role string
	// user, assistant, toolResult
	Content []part
	// assistant
	API, Provider, Model string
	Usage                *usage
	StopReason           string
	ErrorMessage         string
	// toolResult
	ToolCallID, ToolName string
	Details              any
	IsError              bool
	// bashExecution
	Command, Output      string
	ExitCode             int
	Cancelled, Truncated bool
	// compactionSummary
	Summary      string
	TokensBefore int

	Timestamp int64
}

func (m *message) MarshalJSON() ([]byte, error) { return m.obj().appendJSON(nil) }

// obj is the message as pi writes it.
func (m *message) obj() obj {
	content := m.Content
	if content == nil {
		content = []part{}
	}
	var o obj
	switch m.Role {
	case "assistant":
		o = obj{{"role", m.Role}, {"content", content}, {"api", m.API}, {"provider", m.Provider}, {"model", m.Model},
			{"usage", m.Usage}, {"stopReason", m.StopReason}, {"errorMessage", nilIfEmpty(m.ErrorMessage)}}
	case "toolResult":
		o = obj{{"role", m.Role}, {"toolCallId", m.ToolCallID}, {"toolName", m.ToolName}, {"content", content},
			{"details", m.Details}, {"isError", m.IsError}}
	case "bashExecution":
		o = obj{{"role", m.Role}, {"command", m.Command}, {"output", m.Output}, {"exitCode", m.ExitCode},
			{"cancelled", m.Cancelled}, {"truncated", m.Truncated}}
	case "compactionSummary":
		o = obj{{"role", m.Role}, {"summary", m.Summary}, {"tokensBefore", m.TokensBefore}}
	default:
		o = obj{{"role", m.Role}, {"content", content}}
	}
	return append(o, field{"timestamp", m.Timestamp})
}

// UnmarshalJSON reads a message back from a session file.
func (m *message) UnmarshalJSON(b []byte) error {
	var w struct {
		Role         string          `json:"role"`
		Content      json.RawMessage `json:"content"`
		API          string          `json:"api"`
		Provider     string          `json:"provider"`
		Model        string          `json:"model"`
		Usage        *usage          `json:"usage"`
		StopReason   string          `json:"stopReason"`
		ErrorMessage string          `json:"errorMessage"`
		ToolCallID   string          `json:"toolCallId"`
		ToolName     string          `json:"toolName"`
		Details      json.RawMessage `json:"details"`
		IsError      bool            `json:"isError"`
		Command      string          `json:"command"`
		Output       string          `json:"output"`
		ExitCode     int             `json:"exitCode"`
		Cancelled    bool            `json:"cancelled"`
		Truncated    bool            `json:"truncated"`
		Summary      string          `json:"summary"`
		TokensBefore int             `json:"tokensBefore"`
		Timestamp    int64           `json:"timestamp"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = message{Role: w.Role, API: w.API, Provider: w.Provider, Model: w.Model, Usage: w.Usage,
		StopReason: w.StopReason, ErrorMessage: w.ErrorMessage, ToolCallID: w.ToolCallID, ToolName: w.ToolName,
		IsError: w.IsError, Command: w.Command, Output: w.Output, ExitCode: w.ExitCode,
		Cancelled: w.Cancelled, Truncated: w.Truncated, Summary: w.Summary, TokensBefore: w.TokensBefore,
		Timestamp: w.Timestamp}
	if len(w.Details) > 0 {
		m.Details = w.Details
	}
	if len(w.Content) > 0 && w.Content[0] == '"' {
		var s string
		if err := json.Unmarshal(w.Content, &s); err != nil {
			return err
		}
		m.Content = []part{textPart(s)}
	} else if len(w.Content) > 0 {
		if err := json.Unmarshal(w.Content, &m.Content); err != nil {
			return err
		}
	}
	return nil
}

type usage struct {
	Input       int       `json:"input"`
	Output      int       `json:"output"`
	CacheRead   int       `json:"cacheRead"`
	CacheWrite  int       `json:"cacheWrite"`
	TotalTokens int       `json:"totalTokens"`
	Cost        usageCost `json:"cost"`
}

// appendJSON appends the usage as json.Marshal writes it.
func (u *usage) appendJSON(b []byte) ([]byte, error) {
	b = strconv.AppendInt(append(b, `{"input":`...), int64(u.Input), 10)
	b = strconv.AppendInt(append(b, `,"output":`...), int64(u.Output), 10)
	b = strconv.AppendInt(append(b, `,"cacheRead":`...), int64(u.CacheRead), 10)
	b = strconv.AppendInt(append(b, `,"cacheWrite":`...), int64(u.CacheWrite), 10)
	b = strconv.AppendInt(append(b, `,"totalTokens":`...), int64(u.TotalTokens), 10)
	b = append(b, `,"cost":`...)
	c := u.Cost
	var err error
	for _, f := range []struct {
		key string
		v   float64
	}{{`{"input":`, c.Input}, {`,"output":`, c.Output}, {`,"cacheRead":`, c.CacheRead}, {`,"cacheWrite":`, c.CacheWrite}, {`,"total":`, c.Total}} {
		if b, err = appendFloat(append(b, f.key...), f.v); err != nil {
			return nil, err
		}
	}
	return append(b, '}', '}'), nil
}

type usageCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

func nowMillis() int64 { return time.Now().UnixMilli() }

func userMessage(text string) *message {
	return &message{Role: "user", Content: []part{textPart(text)}, Timestamp: nowMillis()}
}

func toolResultMessage(callID, tool string, text string, details any, isError bool) *message {
	return &message{Role: "toolResult", ToolCallID: callID, ToolName: tool, Content: []part{textPart(text)},
		Details: details, IsError: isError, Timestamp: nowMillis()}
}

// clone returns a deep enough copy for a streaming snapshot.
func (m *message) clone() *message {
	c := *m
	c.Content = append([]part(nil), m.Content...)
	if m.Usage != nil {
		u := *m.Usage
		c.Usage = &u
	}
	return &c
}

// text joins the text parts of the message.
func (m *message) text() string {
	var parts []string
	for _, p := range m.Content {
		if p.Type == "text" && p.Text != nil {
			parts = append(parts, *p.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// llmText is the message as the model sees it: user and tool-result text,
// and bash executions rendered as a user message, like pi does.
func (m *message) llmText() string {
	switch m.Role {
	case "bashExecution":
		return "Ran `" + m.Command + "`\n```\n" + m.Output + "\n```"
	case "compactionSummary":
		return m.Summary
	case "assistant":
		var b strings.Builder
		for _, p := range m.Content {
			switch {
			case p.Text != nil:
				b.WriteString(*p.Text)
			case p.Thinking != nil:
				b.WriteString(*p.Thinking)
			default:
				b.Write(p.Arguments)
			}
		}
		return b.String()
	}
	return m.text()
}

// llmChars is the length of llmText in characters (runes), the measure
// the faux provider's token estimate uses.
func (m *message) llmChars() int { return utf8.RuneCountInString(m.llmText()) }

func (m *message) toolCalls() []part {
	var calls []part
	for _, p := range m.Content {
		if p.Type == "toolCall" {
			calls = append(calls, p)
		}
	}
	return calls
}
