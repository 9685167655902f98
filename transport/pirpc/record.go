package pirpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"example.com/pifleet/internal/jsonscan"
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
	if st, ok := v.(*State); ok && st != nil && *st == (State{}) {
		// get_state answers every settle barrier: decoded in one pass.
		if decodeState(data, st) {
			return nil
		}
		*st = State{}
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
//
// The line is validated in one pass and only the members its type needs
// are decoded; a line that pass is unsure of is parsed
// with encoding/json instead, with the same result.
func ParseRecord(raw []byte) (Record, error) {
	if rec, ok := parseUpdateLine(raw); ok {
		return rec, nil
	}
	if rec, ok := parseFast(raw, false); ok {
		return rec, nil
	}
	return parseStd(raw)
}

// ParseValidRecord is ParseRecord for bytes the caller knows to be one
// valid JSON value, such as the event of a frame the transport decoder
// validated: the members it does not need are skipped without being
// validated a second time. On bytes that are not valid JSON after all the
// result is unspecified (it never panics, and never reads past raw).
func ParseValidRecord(raw []byte) (Record, error) {
	if rec, ok := parseFast(raw, true); ok {
		return rec, nil
	}
	return parseStd(raw)
}

// updateLinePrefix and messageMember frame pi's message_update lines:
// {"type":"message_update","assistantMessageEvent":A,"message":M}, where
// M is A's partial again, byte for byte.
var (
	updateLinePrefix = []byte(`{"type":"message_update","assistantMessageEvent":`)
	messageMember    = []byte(`,"message":`)
)

// parseUpdateLine is parseFast for pi's message_update lines, most of its
// output: each carries the partial message twice, as A's last member and
// as M. It validates A in one pass and compares M with A's partial (at
// memory speed) instead of validating the same bytes a second time, so a
// line costs one scan of the partial, not two. Any other line, or one it
// is unsure of, is left to parseFast.
func parseUpdateLine(raw []byte) (Record, bool) {
	rest, ok := bytes.CutPrefix(raw, updateLinePrefix)
	if !ok {
		return Record{}, false
	}
	var buf memberBuf
	sc := jsonscan.Scanner{MaxDepth: maxScanDepth - 1} // A is nested in the line
	ms, end, _ := sc.AppendMembers(buf[:0], rest, 0)
	if end < 0 || len(ms) == 0 {
		return Record{}, false
	}
	last := &ms[len(ms)-1]
	partial := last.Value(rest)
	m, ok := bytes.CutPrefix(rest[end:], messageMember)
	if !ok || last.KeyEsc || string(last.Key(rest)) != "partial" || len(m) != len(partial)+1 || m[len(m)-1] != '}' || !bytes.Equal(m[:len(partial)], partial) {
		return Record{}, false
	}
	u := new(AssistantMessageEvent)
	if !eachMemberOf(ms, rest, updateFields, u.set) {
		return Record{}, false
	}
	return Record{Raw: raw, Event: &Event{Type: EventMessageUpdate, Update: u}}, true
}

// WithDelta returns the record of raw, a message_update line that is r's
// line with only the value of its step's delta changed, to delta (a JSON
// string, quotes included): r's record with Raw and the delta replaced,
// the delta decoded as the parse decodes it. This is what ParseRecord
// gives for raw, without reading the rest of it again, provided the
// caller knows raw to be such a line (streamdelta.Growth tells) and that
// no other member of the step can be read as its delta. ok is false when
// r is not a message_update whose step decoded, or delta is not a string.
func (r Record) WithDelta(raw, delta []byte) (Record, bool) {
	e := r.Event
	if e == nil || e.Type != EventMessageUpdate || e.Update == nil || e.DecodeErr != nil || len(delta) < 2 || delta[0] != '"' {
		return Record{}, false
	}
	text, ok := decodeString(delta)
	if !ok {
		return Record{}, false
	}
	// The event and its step, in one allocation.
	s := &struct {
		ev   Event
		step AssistantMessageEvent
	}{ev: *e, step: *e.Update}
	s.step.Delta = text
	s.ev.Update = &s.step
	return Record{Raw: raw, Event: &s.ev}, true
}

// parseStd is ParseRecord with encoding/json alone: the fallback, and the
// reference the fast path is tested against.
func parseStd(raw []byte) (Record, error) {
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
	return Record{Raw: raw, Event: w.event(false)}, nil
}

// wireField names a top-level member of wireRecord; spans holds the
// members of one line by field.
type wireField int

const (
	fType wireField = iota
	fID
	fCommand
	fSuccess
	fError
	fData
	fMessage
	fAssistantMessageEvent
	fToolCallID
	fToolName
	fArgs
	fIsError
	fAttempt
	fMaxAttempts
	fDelayMs
	fErrorMessage
	fFinalError
	fReason
	fAborted
	fWillRetry
	fMethod
	fTitle
	fOptions
	fPlaceholder
	fPrefill
	fTimeout
	fNotifyType
	fSteering
	fFollowUp
	fExtensionPath
	fEvent
	fName
	fLevel
	numWireFields
)

// wireFields are wireRecord's JSON names, in wireField order.
var wireFields = newFieldSet("type", "id", "command", "success", "error", "data", "message",
	"assistantMessageEvent", "toolCallId", "toolName", "args", "isError", "attempt", "maxAttempts",
	"delayMs", "errorMessage", "finalError", "reason", "aborted", "willRetry", "method", "title",
	"options", "placeholder", "prefill", "timeout", "notifyType", "steering", "followUp",
	"extensionPath", "event", "name", "level")

// parseFast parses the records encoding/json would parse the same way
// without doubt: valid JSON, each wireRecord member at most once and
// spelled exactly, every member of the type its field takes. It reports
// false for anything else (errors included), for parseStd to handle.
func parseFast(raw []byte, valid bool) (Record, bool) {
	var spans [numWireFields][]byte
	ok := eachLineMember(raw, valid, wireFields, func(f int, value []byte) bool {
		spans[f] = value
		return true
	})
	if !ok {
		return Record{}, false
	}
	if bytes.HasPrefix(raw, updatePrefix) {
		// As parseStd: only the streaming step is decoded (a member of
		// another type does not matter here).
		var u *AssistantMessageEvent
		if span := spans[fAssistantMessageEvent]; span != nil {
			if u, ok = decodeUpdate(span); !ok {
				return Record{}, false
			}
		}
		return Record{Raw: raw, Event: &Event{Type: EventMessageUpdate, Update: u}}, true
	}
	var w wireRecord
	if !w.fill(&spans) || w.Type == nil {
		return Record{}, false
	}
	if *w.Type == "response" {
		r, err := w.response()
		if err != nil {
			return Record{}, false
		}
		return Record{Raw: raw, Response: r}, true
	}
	return Record{Raw: raw, Event: w.event(true)}, true
}

// fill decodes the members' spans into w as encoding/json would, and
// reports false when a member's value does not suit its field.
func (w *wireRecord) fill(spans *[numWireFields][]byte) bool {
	for f, span := range spans {
		if span == nil {
			continue
		}
		var ok bool
		switch wireField(f) {
		case fType:
			if string(span) == "null" {
				ok = true
				break
			}
			var s string
			if s, ok = decodeString(span); ok {
				w.Type = &s
			}
		case fID:
			w.ID, ok = span, true
		case fCommand:
			w.Command, ok = decodeString(span)
		case fSuccess:
			w.Success, ok = span, true
		case fError:
			w.Error, ok = span, true
		case fData:
			w.Data, ok = span, true
		case fMessage:
			w.Message, ok = span, true
		case fAssistantMessageEvent:
			w.AssistantMessageEvent, ok = decodeUpdate(span)
		case fToolCallID:
			w.ToolCallID, ok = decodeString(span)
		case fToolName:
			w.ToolName, ok = decodeString(span)
		case fArgs:
			w.Args, ok = span, true
		case fIsError:
			w.IsError, ok = decodeBool(span)
		case fAttempt:
			w.Attempt, ok = decodeInt(span)
		case fMaxAttempts:
			w.MaxAttempts, ok = decodeInt(span)
		case fDelayMs:
			w.DelayMs, ok = decodeFloat(span)
		case fErrorMessage:
			w.ErrorMessage, ok = decodeString(span)
		case fFinalError:
			w.FinalError, ok = decodeString(span)
		case fReason:
			w.Reason, ok = decodeString(span)
		case fAborted:
			w.Aborted, ok = decodeBool(span)
		case fWillRetry:
			w.WillRetry, ok = decodeBool(span)
		case fMethod:
			w.Method, ok = decodeString(span)
		case fTitle:
			w.Title, ok = decodeString(span)
		case fOptions:
			ok = json.Unmarshal(span, &w.Options) == nil
		case fPlaceholder:
			w.Placeholder, ok = decodeString(span)
		case fPrefill:
			w.Prefill, ok = decodeString(span)
		case fTimeout:
			w.Timeout, ok = decodeFloat(span)
		case fNotifyType:
			w.NotifyType, ok = decodeString(span)
		case fSteering:
			ok = json.Unmarshal(span, &w.Steering) == nil
		case fFollowUp:
			ok = json.Unmarshal(span, &w.FollowUp) == nil
		case fExtensionPath:
			w.ExtensionPath, ok = decodeString(span)
		case fEvent:
			w.Event, ok = decodeString(span)
		case fName:
			w.Name, ok = decodeString(span)
		case fLevel:
			w.Level, ok = decodeString(span)
		}
		if !ok {
			return false
		}
	}
	return true
}

// decodeString decodes a valid string or null span as encoding/json does
// into a string field.
func decodeString(span []byte) (string, bool) {
	if string(span) == "null" {
		return "", true
	}
	if s, ok := plainString(span); ok {
		return s, true
	}
	var s string
	return s, len(span) > 0 && span[0] == '"' && json.Unmarshal(span, &s) == nil
}

func decodeBool(span []byte) (bool, bool) {
	switch string(span) {
	case "true":
		return true, true
	case "false", "null":
		return false, true
	}
	return false, false
}

// decodeInt and decodeFloat parse a number span as encoding/json does for
// an int and a float64 field.
func decodeInt(span []byte) (int, bool) {
	if string(span) == "null" {
		return 0, true
	}
	if len(span) == 0 || span[0] != '-' && (span[0] < '0' || span[0] > '9') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(span), 10, strconv.IntSize)
	return int(n), err == nil
}

func decodeFloat(span []byte) (float64, bool) {
	if string(span) == "null" {
		return 0, true
	}
	if len(span) == 0 || span[0] != '-' && (span[0] < '0' || span[0] > '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(span), 64)
	return f, err == nil
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

// event builds the typed view; fast decodes a message with decodeMessage
// where it can.
func (w *wireRecord) event(fast bool) *Event {
	ev := &Event{Type: EventType(*w.Type)}
	var err error
	switch ev.Type {
	case EventMessageStart, EventMessageEnd, EventTurnEnd:
		if len(w.Message) > 0 && string(w.Message) != "null" {
			ev.Message = new(Message)
			if !fast || !decodeMessage(w.Message, ev.Message) {
				*ev.Message = Message{}
				err = json.Unmarshal(w.Message, ev.Message)
			}
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

var (
	updateFields  = newFieldSet("type", "contentIndex", "delta")
	messageFields = newFieldSet("role", "content", "stopReason", "errorMessage", "usage", "provider", "model",
		"toolCallId", "toolName", "isError", "customType", "timestamp")
	partFields  = newFieldSet("type", "text", "thinking", "id", "name", "arguments", "mimeType")
	usageFields = newFieldSet("input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost")
	costFields  = newFieldSet("input", "output", "cacheRead", "cacheWrite", "total")
)

// decodeUpdate decodes an assistantMessageEvent span (already validated)
// as encoding/json does into a *AssistantMessageEvent, without reading the
// partial message it carries; false means: ask encoding/json.
func decodeUpdate(span []byte) (*AssistantMessageEvent, bool) {
	if string(span) == "null" {
		return nil, true
	}
	u := new(AssistantMessageEvent)
	ok := eachMember(span, updateFields, u.set)
	return u, ok
}

// set decodes the member of updateFields f into u.
func (u *AssistantMessageEvent) set(f int, v []byte) (ok bool) {
	switch f {
	case 0:
		u.Type, ok = decodeString(v)
	case 1:
		u.ContentIndex, ok = decodeInt(v)
	case 2:
		u.Delta, ok = decodeString(v)
	}
	return ok
}

// decodeMessage decodes a message span (already validated) into a zero m
// as encoding/json does; false means: ask encoding/json (m is then
// partly set).
func decodeMessage(span []byte, m *Message) bool {
	return eachMember(span, messageFields, func(f int, v []byte) (ok bool) {
		switch f {
		case 0:
			m.Role, ok = decodeString(v)
		case 1:
			m.Content, ok = decodeContent(v)
		case 2:
			m.StopReason, ok = decodeString(v)
		case 3:
			m.ErrorMessage, ok = decodeString(v)
		case 4:
			m.Usage, ok = decodeUsage(v)
		case 5:
			m.Provider, ok = decodeString(v)
		case 6:
			m.Model, ok = decodeString(v)
		case 7:
			m.ToolCallID, ok = decodeString(v)
		case 8:
			m.ToolName, ok = decodeString(v)
		case 9:
			m.IsError, ok = decodeBool(v)
		case 10:
			m.CustomType, ok = decodeString(v)
		case 11:
			var n int64
			n, ok = decodeInt64(v)
			m.Timestamp = n
		}
		return ok
	})
}

// decodeContent is Content.UnmarshalJSON for the fast path.
func decodeContent(span []byte) (Content, bool) {
	switch {
	case string(span) == "null":
		return nil, true
	case span[0] == '"':
		s, ok := decodeString(span)
		return Content{{Type: "text", Text: s}}, ok
	case span[0] != '[':
		return nil, false
	}
	parts := Content{}
	for at, first := 1, true; ; first = false {
		start, end, more := jsonscan.NextElement(span, at, first)
		if !more {
			return parts, end >= 0
		}
		at = end
		var p ContentPart
		if v := span[start:end]; string(v) != "null" && !eachMember(v, partFields, func(f int, v []byte) (ok bool) {
			switch f {
			case 0:
				p.Type, ok = decodeString(v)
			case 1:
				p.Text, ok = decodeString(v)
			case 2:
				p.Thinking, ok = decodeString(v)
			case 3:
				p.ID, ok = decodeString(v)
			case 4:
				p.Name, ok = decodeString(v)
			case 5:
				p.Arguments, ok = v, true
			case 6:
				p.MimeType, ok = decodeString(v)
			}
			return ok
		}) {
			return nil, false
		}
		parts = append(parts, p)
	}
}

func decodeUsage(span []byte) (*Usage, bool) {
	if string(span) == "null" {
		return nil, true
	}
	u := new(Usage)
	ok := eachMember(span, usageFields, func(f int, v []byte) (ok bool) {
		switch f {
		case 0:
			u.Input, ok = decodeFloat(v)
		case 1:
			u.Output, ok = decodeFloat(v)
		case 2:
			u.CacheRead, ok = decodeFloat(v)
		case 3:
			u.CacheWrite, ok = decodeFloat(v)
		case 4:
			u.TotalTokens, ok = decodeFloat(v)
		case 5:
			c := &u.Cost
			return decodeNumbers(v, costFields, &c.Input, &c.Output, &c.CacheRead, &c.CacheWrite, &c.Total)
		}
		return ok
	})
	return u, ok
}

// decodeNumbers decodes an object of numbers (a price, a cost) as
// encoding/json does into a struct value: the member named by the i-th of
// fields into *into[i]; null leaves the struct as it is.
func decodeNumbers(span []byte, fields fieldSet, into ...*float64) bool {
	if string(span) == "null" {
		return true
	}
	return eachMember(span, fields, func(f int, v []byte) (ok bool) {
		*into[f], ok = decodeFloat(v)
		return ok
	})
}

func decodeInt64(span []byte) (int64, bool) {
	if string(span) == "null" {
		return 0, true
	}
	if len(span) == 0 || span[0] != '-' && (span[0] < '0' || span[0] > '9') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(span), 10, 64)
	return n, err == nil
}

var (
	stateFields = newFieldSet("model", "thinkingLevel", "isStreaming", "isCompacting", "steeringMode",
		"followUpMode", "sessionFile", "sessionId", "sessionName", "autoCompactionEnabled", "messageCount",
		"pendingMessageCount")
	modelFields = newFieldSet("id", "name", "api", "provider", "baseUrl", "reasoning", "input", "cost",
		"contextWindow", "maxTokens")
	modelCostFields = newFieldSet("input", "output", "cacheRead", "cacheWrite")
)

// decodeState decodes get_state's data (validating it) into a zero st as
// encoding/json does; false means: ask encoding/json (st is then partly
// set).
func decodeState(data []byte, st *State) bool {
	return eachLineMember(data, false, stateFields, func(f int, v []byte) (ok bool) {
		switch f {
		case 0:
			st.Model, ok = decodeModel(v)
		case 1:
			st.ThinkingLevel, ok = decodeString(v)
		case 2:
			st.IsStreaming, ok = decodeBool(v)
		case 3:
			st.IsCompacting, ok = decodeBool(v)
		case 4:
			st.SteeringMode, ok = decodeString(v)
		case 5:
			st.FollowUpMode, ok = decodeString(v)
		case 6:
			st.SessionFile, ok = decodeString(v)
		case 7:
			st.SessionID, ok = decodeString(v)
		case 8:
			st.SessionName, ok = decodeString(v)
		case 9:
			st.AutoCompactionEnabled, ok = decodeBool(v)
		case 10:
			st.MessageCount, ok = decodeInt(v)
		case 11:
			st.PendingMessageCount, ok = decodeInt(v)
		}
		return ok
	})
}

func decodeModel(span []byte) (*Model, bool) {
	if string(span) == "null" {
		return nil, true
	}
	m := new(Model)
	ok := eachMember(span, modelFields, func(f int, v []byte) (ok bool) {
		switch f {
		case 0:
			m.ID, ok = decodeString(v)
		case 1:
			m.Name, ok = decodeString(v)
		case 2:
			m.API, ok = decodeString(v)
		case 3:
			m.Provider, ok = decodeString(v)
		case 4:
			m.BaseURL, ok = decodeString(v)
		case 5:
			m.Reasoning, ok = decodeBool(v)
		case 6:
			m.Input, ok = decodeStrings(v)
		case 7:
			c := &m.Cost
			return decodeNumbers(v, modelCostFields, &c.Input, &c.Output, &c.CacheRead, &c.CacheWrite)
		case 8:
			m.ContextWindow, ok = decodeFloat(v)
		case 9:
			m.MaxTokens, ok = decodeFloat(v)
		}
		return ok
	})
	return m, ok
}

// decodeStrings decodes an array of strings (a member of validated JSON)
// as encoding/json does into a []string.
func decodeStrings(span []byte) ([]string, bool) {
	switch {
	case string(span) == "null":
		return nil, true
	case span[0] != '[':
		return nil, false
	}
	out := []string{}
	for at, first := 1, true; ; first = false {
		start, end, more := jsonscan.NextElement(span, at, first)
		if !more {
			return out, end >= 0
		}
		at = end
		v, ok := decodeString(span[start:end])
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
}
