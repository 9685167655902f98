package pirpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Command is a request to pi. Its JSON encoding (an object) holds the
// command's own fields; the Client adds "id" and "type".
type Command interface {
	// CommandType is the command's "type" on the wire.
	CommandType() string
}

// noResponse marks commands pi never answers.
type noResponse interface{ noResponse() }

// Image is an image attached to a prompt, steer or follow-up.
type Image struct {
	Type     string `json:"type"` // "image"
	Data     string `json:"data"` // base64
	MimeType string `json:"mimeType"`
}

// Streaming behaviours of a prompt sent while a run is active.
const (
	StreamingSteer    = "steer"
	StreamingFollowUp = "followUp"
)

// Prompt starts a run. pi answers once the prompt passed its checks, before
// agent_start; failures after that arrive only as events. While a run is
// active it fails unless StreamingBehavior says how to queue it. A message
// starting with "/name" runs extension command name, and its response comes
// when the command returns.
type Prompt struct {
	Message           string  `json:"message"`
	Images            []Image `json:"images,omitempty"`
	StreamingBehavior string  `json:"streamingBehavior,omitempty"`
}

// Steer queues a message that is delivered after the current turn (or right
// after the next prompt's message when idle).
type Steer struct {
	Message string  `json:"message"`
	Images  []Image `json:"images,omitempty"`
}

// FollowUp queues a message delivered when the run would otherwise stop.
type FollowUp struct {
	Message string  `json:"message"`
	Images  []Image `json:"images,omitempty"`
}

// Abort stops the current run; pi answers after agent_end. Queues are kept.
type Abort struct{}

// NewSession starts a new session (result: Cancelled).
type NewSession struct {
	ParentSession string `json:"parentSession,omitempty"`
}

// GetState asks for the worker's state (result: State).
type GetState struct{}

// GetMessages asks for the current context (result: Messages).
type GetMessages struct{}

// SetModel selects a model with configured auth (result: Model).
type SetModel struct {
	Provider string `json:"provider"`
	ModelID  string `json:"modelId"`
}

// CycleModel moves to the next model of --models (result: raw, or null).
type CycleModel struct{}

// GetAvailableModels lists models with auth configured (result: Models).
type GetAvailableModels struct{}

// SetThinkingLevel sets off, minimal, low, medium, high or xhigh (clamped
// to what the model supports).
type SetThinkingLevel struct {
	Level string `json:"level"`
}

// CycleThinkingLevel moves to the next level (result: {level} or null).
type CycleThinkingLevel struct{}

// Queue delivery modes.
const (
	QueueModeAll        = "all"
	QueueModeOneAtATime = "one-at-a-time"
)

// SetSteeringMode sets how queued steers are delivered.
type SetSteeringMode struct {
	Mode string `json:"mode"`
}

// SetFollowUpMode sets how queued follow-ups are delivered.
type SetFollowUpMode struct {
	Mode string `json:"mode"`
}

// Compact compacts the context now (result: CompactResult). It aborts a
// running run first.
type Compact struct {
	CustomInstructions string `json:"customInstructions,omitempty"`
}

// SetAutoCompaction turns automatic compaction on or off.
type SetAutoCompaction struct {
	Enabled bool `json:"enabled"`
}

// SetAutoRetry turns automatic retry of transient errors on or off.
type SetAutoRetry struct {
	Enabled bool `json:"enabled"`
}

// AbortRetry cancels a pending auto-retry.
type AbortRetry struct{}

// Bash runs a shell command now, outside any run (result: BashResult). It
// emits no event; the output reaches the model with the next prompt.
type Bash struct {
	Command string `json:"command"`
}

// AbortBash stops a running Bash command.
type AbortBash struct{}

// GetSessionStats asks for counts, tokens and cost (result: SessionStats).
type GetSessionStats struct{}

// ExportHTML writes the session as HTML (result: {path}).
type ExportHTML struct {
	OutputPath string `json:"outputPath,omitempty"`
}

// SwitchSession opens another session file (result: Cancelled).
type SwitchSession struct {
	SessionPath string `json:"sessionPath"`
}

// Fork writes a new session holding the branch before the user message
// EntryID (result: ForkResult).
type Fork struct {
	EntryID string `json:"entryId"`
}

// Clone writes a new session file with the active branch; its header names
// the old file as parentSession (result: Cancelled).
type Clone struct{}

// GetForkMessages lists the user messages one can fork at (result:
// ForkMessages).
type GetForkMessages struct{}

// GetLastAssistantText asks for the text of the last assistant message
// (result: LastAssistantText).
type GetLastAssistantText struct{}

// SetSessionName names the session; pi writes a session_info entry and
// emits session_info_changed. The name must not be blank.
type SetSessionName struct {
	Name string `json:"name"`
}

// GetCommands lists extension commands, prompt templates and skills
// (result: Commands).
type GetCommands struct{}

// ExtensionUIResponse answers an extension_ui_request dialog. pi sends no
// response to it; send it with Client.Send (Call does the same and returns
// a nil response). Set exactly one of Value, Confirmed or Cancelled.
type ExtensionUIResponse struct {
	ID        string  `json:"id"`
	Value     *string `json:"value,omitempty"`
	Confirmed *bool   `json:"confirmed,omitempty"`
	Cancelled bool    `json:"cancelled,omitempty"`
}

// GetEntries reads raw session entries after the entry id Since (newer pi
// only: ErrUnsupported on 0.73.1).
type GetEntries struct {
	Since string `json:"since,omitempty"`
}

// ClearQueue empties the steering and follow-up queues (newer pi only).
type ClearQueue struct{}

// RawCommand is any command, for types this package does not model. Fields
// is a JSON object with the command's fields (nil means none); it must not
// contain "id" or "type".
type RawCommand struct {
	Type   string
	Fields json.RawMessage
}

// MarshalJSON returns Fields (or an empty object).
func (c RawCommand) MarshalJSON() ([]byte, error) {
	if len(c.Fields) == 0 {
		return []byte("{}"), nil
	}
	return c.Fields, nil
}

func (Prompt) CommandType() string               { return "prompt" }
func (Steer) CommandType() string                { return "steer" }
func (FollowUp) CommandType() string             { return "follow_up" }
func (Abort) CommandType() string                { return "abort" }
func (NewSession) CommandType() string           { return "new_session" }
func (GetState) CommandType() string             { return "get_state" }
func (GetMessages) CommandType() string          { return "get_messages" }
func (SetModel) CommandType() string             { return "set_model" }
func (CycleModel) CommandType() string           { return "cycle_model" }
func (GetAvailableModels) CommandType() string   { return "get_available_models" }
func (SetThinkingLevel) CommandType() string     { return "set_thinking_level" }
func (CycleThinkingLevel) CommandType() string   { return "cycle_thinking_level" }
func (SetSteeringMode) CommandType() string      { return "set_steering_mode" }
func (SetFollowUpMode) CommandType() string      { return "set_follow_up_mode" }
func (Compact) CommandType() string              { return "compact" }
func (SetAutoCompaction) CommandType() string    { return "set_auto_compaction" }
func (SetAutoRetry) CommandType() string         { return "set_auto_retry" }
func (AbortRetry) CommandType() string           { return "abort_retry" }
func (Bash) CommandType() string                 { return "bash" }
func (AbortBash) CommandType() string            { return "abort_bash" }
func (GetSessionStats) CommandType() string      { return "get_session_stats" }
func (ExportHTML) CommandType() string           { return "export_html" }
func (SwitchSession) CommandType() string        { return "switch_session" }
func (Fork) CommandType() string                 { return "fork" }
func (Clone) CommandType() string                { return "clone" }
func (GetForkMessages) CommandType() string      { return "get_fork_messages" }
func (GetLastAssistantText) CommandType() string { return "get_last_assistant_text" }
func (SetSessionName) CommandType() string       { return "set_session_name" }
func (GetCommands) CommandType() string          { return "get_commands" }
func (ExtensionUIResponse) CommandType() string  { return "extension_ui_response" }
func (GetEntries) CommandType() string           { return "get_entries" }
func (ClearQueue) CommandType() string           { return "clear_queue" }
func (c RawCommand) CommandType() string         { return c.Type }

func (ExtensionUIResponse) noResponse() {}

// EncodeCommand returns the command's wire form without the trailing LF:
// {"id":…,"type":…, fields…}. An empty id is left out.
func EncodeCommand(id string, cmd Command) ([]byte, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("pirpc: encoding %s: %w", cmd.CommandType(), err)
	}
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return nil, fmt.Errorf("pirpc: encoding %s: fields are not a JSON object", cmd.CommandType())
	}
	out := make([]byte, 0, len(body)+len(id)+len(cmd.CommandType())+24)
	out = append(out, '{')
	if id != "" {
		out = append(out, `"id":`...)
		out = strconv.AppendQuote(out, id)
		out = append(out, ',')
	}
	out = append(out, `"type":`...)
	typ, _ := json.Marshal(cmd.CommandType())
	out = append(out, typ...)
	if inner := bytes.TrimSpace(body[1 : len(body)-1]); len(inner) > 0 {
		out = append(out, ',')
		out = append(out, inner...)
	}
	return append(out, '}'), nil
}

// State is get_state's result.
type State struct {
	Model                 *Model `json:"model"`
	ThinkingLevel         string `json:"thinkingLevel"`
	IsStreaming           bool   `json:"isStreaming"`
	IsCompacting          bool   `json:"isCompacting"`
	SteeringMode          string `json:"steeringMode"`
	FollowUpMode          string `json:"followUpMode"`
	SessionFile           string `json:"sessionFile,omitempty"`
	SessionID             string `json:"sessionId"`
	SessionName           string `json:"sessionName,omitempty"`
	AutoCompactionEnabled bool   `json:"autoCompactionEnabled"`
	MessageCount          int    `json:"messageCount"`
	PendingMessageCount   int    `json:"pendingMessageCount"`
}

// Model is a model as pi describes it.
type Model struct {
	ID            string    `json:"id"`
	Name          string    `json:"name"`
	API           string    `json:"api"`
	Provider      string    `json:"provider"`
	BaseURL       string    `json:"baseUrl,omitempty"`
	Reasoning     bool      `json:"reasoning"`
	Input         []string  `json:"input"`
	Cost          ModelCost `json:"cost"`
	ContextWindow float64   `json:"contextWindow"`
	MaxTokens     float64   `json:"maxTokens"`
}

// ModelCost is a model's price in dollars per million tokens.
type ModelCost struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead"`
	CacheWrite float64 `json:"cacheWrite"`
}

// Models is get_available_models's result.
type Models struct {
	Models []Model `json:"models"`
}

// Messages is get_messages's result.
type Messages struct {
	Messages []Message `json:"messages"`
}

// Cancelled is the result of new_session, switch_session and clone.
type Cancelled struct {
	Cancelled bool `json:"cancelled"`
}

// ForkResult is fork's result: Text is the user message forked at.
type ForkResult struct {
	Text      string `json:"text"`
	Cancelled bool   `json:"cancelled"`
}

// ForkMessages is get_fork_messages's result.
type ForkMessages struct {
	Messages []ForkMessage `json:"messages"`
}

// ForkMessage is a user message one can fork at.
type ForkMessage struct {
	EntryID string `json:"entryId"`
	Text    string `json:"text"`
}

// LastAssistantText is get_last_assistant_text's result; Text is nil when
// there is no assistant message.
type LastAssistantText struct {
	Text *string `json:"text"`
}

// CompactResult is compact's result.
type CompactResult struct {
	Summary          string          `json:"summary"`
	FirstKeptEntryID string          `json:"firstKeptEntryId"`
	TokensBefore     float64         `json:"tokensBefore"`
	Details          json.RawMessage `json:"details,omitempty"`
}

// BashResult is bash's result.
type BashResult struct {
	Output         string `json:"output"`
	ExitCode       *int   `json:"exitCode"`
	Cancelled      bool   `json:"cancelled"`
	Truncated      bool   `json:"truncated"`
	FullOutputPath string `json:"fullOutputPath,omitempty"`
}

// SessionStats is get_session_stats's result.
type SessionStats struct {
	SessionFile       string `json:"sessionFile,omitempty"`
	SessionID         string `json:"sessionId"`
	UserMessages      int    `json:"userMessages"`
	AssistantMessages int    `json:"assistantMessages"`
	ToolCalls         int    `json:"toolCalls"`
	ToolResults       int    `json:"toolResults"`
	TotalMessages     int    `json:"totalMessages"`
	Tokens            struct {
		Input      float64 `json:"input"`
		Output     float64 `json:"output"`
		CacheRead  float64 `json:"cacheRead"`
		CacheWrite float64 `json:"cacheWrite"`
		Total      float64 `json:"total"`
	} `json:"tokens"`
	Cost         float64 `json:"cost"`
	ContextUsage *struct {
		Tokens        float64 `json:"tokens"`
		ContextWindow float64 `json:"contextWindow"`
		Percent       float64 `json:"percent"`
	} `json:"contextUsage,omitempty"`
}

// Commands is get_commands's result.
type Commands struct {
	Commands []CommandInfo `json:"commands"`
}

// CommandInfo describes one command a prompt can invoke as "/name".
type CommandInfo struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Source is "extension", "prompt" or "skill".
	Source     string          `json:"source"`
	SourceInfo json.RawMessage `json:"sourceInfo,omitempty"`
}
