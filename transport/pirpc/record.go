package pirpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// EventType is the "type" of a record pi writes that is not a response.
type EventType string

// The events of pi 0.73.1, plus agent_settled of newer releases.
const (
	EventAgentStart           EventType = "agent_start"
	EventAgentEnd             EventType = "agent_end"
	EventTurnStart            EventType = "turn_start"
	EventTurnEnd              EventType = "turn_end"
	EventMessageStart         EventType = "message_start"
	EventMessageUpdate        EventType = "message_update"
	EventMessageEnd           EventType = "message_end"
	EventToolExecutionStart   EventType = "tool_execution_start"
	EventToolExecutionUpdate  EventType = "tool_execution_update"
	EventToolExecutionEnd     EventType = "tool_execution_end"
	EventQueueUpdate          EventType = "queue_update"
	EventCompactionStart      EventType = "compaction_start"
	EventCompactionEnd        EventType = "compaction_end"
	EventAutoRetryStart       EventType = "auto_retry_start"
	EventAutoRetryEnd         EventType = "auto_retry_end"
	EventSessionInfoChanged   EventType = "session_info_changed"
	EventThinkingLevelChanged EventType = "thinking_level_changed"
	EventExtensionError       EventType = "extension_error"
	EventExtensionUIRequest   EventType = "extension_ui_request"
	// EventAgentSettled is sent by newer pi releases (not 0.73.1) once a
	// run, its retries and compactions are over.
	EventAgentSettled EventType = "agent_settled"
)

// Message roles.
const (
	RoleUser          = "user"
	RoleAssistant     = "assistant"
	RoleToolResult    = "toolResult"
	RoleBashExecution = "bashExecution"
)

// Assistant stop reasons.
const (
	StopReasonStop    = "stop"
	StopReasonLength  = "length"
	StopReasonToolUse = "toolUse"
	StopReasonError   = "error"
	StopReasonAborted = "aborted"
)

// Record is one parsed line of pi's stdout: either an event or a response.
type Record struct {
	// Raw is the line exactly as pi wrote it (without LF and trailing CR).
	Raw []byte
	// Event is set when the record is an event.
	Event *Event
	// Response is set when the record is a response to a command.
	Response *Response
}

// Response answers a command.
type Response struct {
	// ID echoes the command's id; it is empty when pi sent none (commands
	// sent without id, unknown commands and unparsable lines).
	ID      string
	Command string
	Success bool
	// Error is pi's message when Success is false.
	Error string
	// Data is the command's result, when it has one.
	Data json.RawMessage
}

// Err returns nil for a successful response and a *CommandError otherwise.
func (r *Response) Err() error {
	if r.Success {
		return nil
	}
	return &CommandError{Command: r.Command, Message: r.Error}
}

// Decode unmarshals Data into v. A response without data decodes as JSON
// null (v is left as is).
func (r *Response) Decode(v any) error {
	data := r.Data
	if len(data) == 0 {
		data = []byte("null")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("pirpc: decoding %s response: %w", r.Command, err)
	}
	return nil
}

// Event is the typed view of one pi event. Only the fields of its Type are
// set; Raw in the enclosing Record keeps everything else.
type Event struct {
	Type EventType

	// Message is the message of message_start and message_end, and the
	// assistant message of turn_end. It is not set for message_update,
	// whose message is a partial one (see Update).
	Message *Message
	// Update is the streaming step of a message_update.
	Update *AssistantMessageEvent
	// Tool is set for tool_execution_start, _update and _end.
	Tool *ToolExecution
	// Retry is set for auto_retry_start and auto_retry_end.
	Retry *AutoRetry
	// Compaction is set for compaction_start and compaction_end.
	Compaction *Compaction
	// UIRequest is set for extension_ui_request.
	UIRequest *UIRequest
	// Queue is set for queue_update.
	Queue *QueueUpdate
	// ExtensionError is set for extension_error.
	ExtensionError *ExtensionError
	// SessionName is the new name of a session_info_changed.
	SessionName string
	// ThinkingLevel is the new level of a thinking_level_changed.
	ThinkingLevel string
	// Aborted is agent_settled's flag (newer pi).
	Aborted bool

	// DecodeErr is set when the record is a valid event whose typed view
	// could not be decoded (unexpected field types). The event is still
	// delivered: Raw is what gets forwarded.
	DecodeErr error
}

// Message is an agent message as pi sends it.
type Message struct {
	Role         string  `json:"role"`
	Content      Content `json:"content"`
	StopReason   string  `json:"stopReason,omitempty"`
	ErrorMessage string  `json:"errorMessage,omitempty"`
	Usage        *Usage  `json:"usage,omitempty"`
	Provider     string  `json:"provider,omitempty"`
	Model        string  `json:"model,omitempty"`
	// Tool results.
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
	// Custom messages.
	CustomType string `json:"customType,omitempty"`
	// Timestamp is in milliseconds since the epoch.
	Timestamp int64 `json:"timestamp,omitempty"`
}

// Text returns the message's text parts joined by LF.
func (m *Message) Text() string {
	var b strings.Builder
	n := 0
	for _, p := range m.Content {
		if p.Type != "text" {
			continue
		}
		if n > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
		n++
	}
	return b.String()
}

// Cost is the message's usage.cost.total, or 0.
func (m *Message) Cost() float64 {
	if m.Usage == nil {
		return 0
	}
	return m.Usage.Cost.Total
}

// ContentPart is one block of a message: text, thinking, toolCall or image.
type ContentPart struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
}

// Content is a message's content. pi sends either an array of parts or,
// for user messages, a plain string; a string decodes as one text part.
type Content []ContentPart

// UnmarshalJSON accepts an array of parts or a string.
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = Content{{Type: "text", Text: s}}
		return nil
	}
	var parts []ContentPart
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	*c = parts
	return nil
}

// Usage is an assistant message's token usage and cost.
type Usage struct {
	Input       float64   `json:"input"`
	Output      float64   `json:"output"`
	CacheRead   float64   `json:"cacheRead"`
	CacheWrite  float64   `json:"cacheWrite"`
	TotalTokens float64   `json:"totalTokens"`
	Cost        UsageCost `json:"cost"`
}

// UsageCost is the cost of one message in dollars.
type UsageCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
	Total      float64 `json:"total"`
}

// AssistantMessageEvent is the streaming step carried by message_update.
type AssistantMessageEvent struct {
	// Type is text_start, text_delta, text_end, thinking_*, toolcall_*,
	// done or error.
	Type         string `json:"type"`
	ContentIndex int    `json:"contentIndex"`
	Delta        string `json:"delta,omitempty"`
}

// ToolExecution is the common part of the tool_execution_* events.
type ToolExecution struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args,omitempty"`
	// IsError is set on tool_execution_end.
	IsError bool `json:"isError,omitempty"`
}

// AutoRetry is the payload of auto_retry_start and auto_retry_end.
type AutoRetry struct {
	Attempt      int     `json:"attempt"`
	MaxAttempts  int     `json:"maxAttempts,omitempty"`
	DelayMs      float64 `json:"delayMs,omitempty"`
	ErrorMessage string  `json:"errorMessage,omitempty"`
	// Success and FinalError are set on auto_retry_end.
	Success    bool   `json:"success,omitempty"`
	FinalError string `json:"finalError,omitempty"`
}

// Compaction is the payload of compaction_start and compaction_end.
type Compaction struct {
	// Reason is "manual", "threshold" or "overflow".
	Reason string `json:"reason"`
	// The rest is set on compaction_end.
	Aborted      bool   `json:"aborted,omitempty"`
	WillRetry    bool   `json:"willRetry,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
}

// UIRequest is an extension_ui_request. Dialog methods (select, confirm,
// input, editor) wait for an ExtensionUIResponse with the same ID; the
// others (notify, setStatus, setWidget, setTitle, set_editor_text) do not.
type UIRequest struct {
	ID          string   `json:"id"`
	Method      string   `json:"method"`
	Title       string   `json:"title,omitempty"`
	Message     string   `json:"message,omitempty"`
	Options     []string `json:"options,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	Prefill     string   `json:"prefill,omitempty"`
	// Timeout in milliseconds, after which pi answers the dialog itself.
	Timeout    float64 `json:"timeout,omitempty"`
	NotifyType string  `json:"notifyType,omitempty"`
}

// IsDialog reports whether pi waits for an answer to the request.
func (u *UIRequest) IsDialog() bool {
	switch u.Method {
	case "select", "confirm", "input", "editor":
		return true
	}
	return false
}

// QueueUpdate is the payload of queue_update: both queues, whole.
type QueueUpdate struct {
	Steering []string `json:"steering"`
	FollowUp []string `json:"followUp"`
}

// ExtensionError is the payload of extension_error.
type ExtensionError struct {
	ExtensionPath string `json:"extensionPath"`
	Event         string `json:"event"`
	Error         string `json:"error"`
}

// wireRecord holds every top-level field any record may carry. Fields whose
// JSON type differs between record types ("message", "success", "error")
// are kept raw and decoded once the type is known.
type wireRecord struct {
	Type    *string         `json:"type"`
	ID      json.RawMessage `json:"id"`
	Command string          `json:"command"`
	Success json.RawMessage `json:"success"`
	Error   json.RawMessage `json:"error"`
	Data    json.RawMessage `json:"data"`

	Message               json.RawMessage        `json:"message"`
	AssistantMessageEvent *AssistantMessageEvent `json:"assistantMessageEvent"`

	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
	IsError    bool            `json:"isError"`

	Attempt      int     `json:"attempt"`
	MaxAttempts  int     `json:"maxAttempts"`
	DelayMs      float64 `json:"delayMs"`
	ErrorMessage string  `json:"errorMessage"`
	FinalError   string  `json:"finalError"`

	Reason    string `json:"reason"`
	Aborted   bool   `json:"aborted"`
	WillRetry bool   `json:"willRetry"`

	Method      string   `json:"method"`
	Title       string   `json:"title"`
	Options     []string `json:"options"`
	Placeholder string   `json:"placeholder"`
	Prefill     string   `json:"prefill"`
	Timeout     float64  `json:"timeout"`
	NotifyType  string   `json:"notifyType"`

	Steering []string `json:"steering"`
	FollowUp []string `json:"followUp"`

	ExtensionPath string `json:"extensionPath"`
	Event         string `json:"event"`
	Name          string `json:"name"`
	Level         string `json:"level"`
}

// updatePrefix is how pi starts every message_update line.
var updatePrefix = []byte(`{"type":"message_update",`)

// ParseRecord parses one line of pi's stdout. The line must be a JSON
// object with a string "type"; anything else is a *RecordError. An event
// whose typed view does not decode is still returned, with
// Event.DecodeErr set. raw is retained, not copied.
func ParseRecord(raw []byte) (Record, error) {
	if bytes.HasPrefix(raw, updatePrefix) {
		// Most of pi's output: message_update events, each carrying the
		// partial message twice. Only the streaming step is decoded.
		var u struct {
			AssistantMessageEvent *AssistantMessageEvent `json:"assistantMessageEvent"`
		}
		if err := json.Unmarshal(raw, &u); err == nil {
			return Record{Raw: raw, Event: &Event{Type: EventMessageUpdate, Update: u.AssistantMessageEvent}}, nil
		}
	}
	var w wireRecord
	if err := json.Unmarshal(raw, &w); err != nil {
		// A well-formed object whose fields have unexpected types still
		// has a type worth delivering.
		var head struct {
			Type *string `json:"type"`
		}
		if json.Unmarshal(raw, &head) != nil || head.Type == nil || *head.Type == "response" {
			return Record{}, &RecordError{Raw: truncate(raw), Err: err}
		}
		return Record{Raw: raw, Event: &Event{Type: EventType(*head.Type), DecodeErr: err}}, nil
	}
	if w.Type == nil {
		return Record{}, &RecordError{Raw: truncate(raw), Err: errors.New(`no string "type"`)}
	}
	if *w.Type == "response" {
		r, err := w.response()
		if err != nil {
			return Record{}, &RecordError{Raw: truncate(raw), Err: err}
		}
		return Record{Raw: raw, Response: r}, nil
	}
	return Record{Raw: raw, Event: w.event()}, nil
}

func (w *wireRecord) response() (*Response, error) {
	r := &Response{Command: w.Command}
	if len(w.ID) > 0 && string(w.ID) != "null" {
		if err := json.Unmarshal(w.ID, &r.ID); err != nil {
			return nil, fmt.Errorf("response id: %w", err)
		}
	}
	if err := json.Unmarshal(orNull(w.Success), &r.Success); err != nil {
		return nil, fmt.Errorf("response success: %w", err)
	}
	if len(w.Error) > 0 && string(w.Error) != "null" {
		if err := json.Unmarshal(w.Error, &r.Error); err != nil {
			r.Error = string(w.Error)
		}
	}
	if len(w.Data) > 0 && string(w.Data) != "null" {
		r.Data = w.Data
	}
	return r, nil
}

func (w *wireRecord) event() *Event {
	ev := &Event{Type: EventType(*w.Type)}
	var err error
	switch ev.Type {
	case EventMessageStart, EventMessageEnd, EventTurnEnd:
		if len(w.Message) > 0 && string(w.Message) != "null" {
			ev.Message = new(Message)
			err = json.Unmarshal(w.Message, ev.Message)
		}
	case EventMessageUpdate:
		ev.Update = w.AssistantMessageEvent
	case EventToolExecutionStart, EventToolExecutionUpdate, EventToolExecutionEnd:
		ev.Tool = &ToolExecution{ToolCallID: w.ToolCallID, ToolName: w.ToolName, Args: w.Args, IsError: w.IsError}
	case EventAutoRetryStart, EventAutoRetryEnd:
		ev.Retry = &AutoRetry{Attempt: w.Attempt, MaxAttempts: w.MaxAttempts, DelayMs: w.DelayMs,
			ErrorMessage: w.ErrorMessage, FinalError: w.FinalError}
		if ev.Type == EventAutoRetryEnd {
			err = json.Unmarshal(orNull(w.Success), &ev.Retry.Success)
		}
	case EventCompactionStart, EventCompactionEnd:
		ev.Compaction = &Compaction{Reason: w.Reason, Aborted: w.Aborted, WillRetry: w.WillRetry, ErrorMessage: w.ErrorMessage}
	case EventExtensionUIRequest:
		ev.UIRequest = &UIRequest{Method: w.Method, Title: w.Title, Options: w.Options,
			Placeholder: w.Placeholder, Prefill: w.Prefill, Timeout: w.Timeout, NotifyType: w.NotifyType}
		err = errors.Join(unmarshalOptional(w.ID, &ev.UIRequest.ID), unmarshalOptional(w.Message, &ev.UIRequest.Message))
	case EventQueueUpdate:
		ev.Queue = &QueueUpdate{Steering: w.Steering, FollowUp: w.FollowUp}
	case EventExtensionError:
		ev.ExtensionError = &ExtensionError{ExtensionPath: w.ExtensionPath, Event: w.Event}
		err = unmarshalOptional(w.Error, &ev.ExtensionError.Error)
	case EventSessionInfoChanged:
		ev.SessionName = w.Name
	case EventThinkingLevelChanged:
		ev.ThinkingLevel = w.Level
	case EventAgentSettled:
		ev.Aborted = w.Aborted
	}
	if err != nil {
		ev.DecodeErr = fmt.Errorf("pirpc: %s event: %w", ev.Type, err)
	}
	return ev
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func unmarshalOptional(b json.RawMessage, v any) error {
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, v)
}

func truncate(b []byte) []byte {
	const max = 200
	if len(b) > max {
		return bytes.Clone(b[:max])
	}
	return bytes.Clone(b)
}
