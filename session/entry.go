package session

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// CurrentVersion is the session file version pi 0.73.1 writes.
const CurrentVersion = 3

// minEntryVersion is the first version whose entries carry id and parentId
// (v1 files are linear and id-less; pi migrates them when it opens them).
const minEntryVersion = 2

// Header is the first line of a session file.
type Header struct {
	Type string `json:"type"` // always "session"
	// Version is the file format version; 0 means absent, which pi reads
	// as version 1.
	Version   int    `json:"version,omitempty"`
	ID        string `json:"id"` // pi's session id (a UUIDv7)
	Timestamp string `json:"timestamp"`
	Cwd       string `json:"cwd"`
	// ParentSession is the path of the session this one was cloned or
	// forked from.
	ParentSession string `json:"parentSession,omitempty"`
	// Name is only written by the TypeScript pi-fleet's own format; real pi
	// keeps names in session_info entries.
	Name string `json:"name,omitempty"`
}

// EffectiveVersion is Version, with an absent version read as 1.
func (h Header) EffectiveVersion() int {
	if h.Version == 0 {
		return 1
	}
	return h.Version
}

// EntryType is the "type" of a session entry.
type EntryType string

// The entry types of pi 0.73.1. Others may appear in newer files; they are
// read like any entry (type, id, parentId, timestamp, raw line).
const (
	TypeMessage             EntryType = "message"
	TypeModelChange         EntryType = "model_change"
	TypeThinkingLevelChange EntryType = "thinking_level_change"
	TypeCompaction          EntryType = "compaction"
	TypeBranchSummary       EntryType = "branch_summary"
	TypeCustom              EntryType = "custom"
	TypeCustomMessage       EntryType = "custom_message"
	TypeLabel               EntryType = "label"
	TypeSessionInfo         EntryType = "session_info"
)

const headerType = "session"

// Entry is one line after the header. The type-specific fields are flat,
// as in the file; only those of the entry's Type are set.
type Entry struct {
	Type EntryType `json:"type"`
	// ID is 8 hex characters in files pi writes (a full UUID after an id
	// collision); any non-empty string is accepted.
	ID string `json:"id"`
	// ParentID is "" for the first entry (null in the file).
	ParentID  string `json:"parentId"`
	Timestamp string `json:"timestamp"` // ISO 8601, as pi wrote it

	// message: the AgentMessage, raw, and its role (user, assistant,
	// toolResult, bashExecution, custom, …).
	Message json.RawMessage `json:"message,omitempty"`
	Role    string          `json:"-"`

	// model_change
	Provider string `json:"provider,omitempty"`
	ModelID  string `json:"modelId,omitempty"`

	// thinking_level_change
	ThinkingLevel string `json:"thinkingLevel,omitempty"`

	// compaction (Summary, FirstKeptEntryID, TokensBefore) and
	// branch_summary (Summary, FromID); both may carry Details and FromHook.
	Summary          string          `json:"summary,omitempty"`
	FirstKeptEntryID string          `json:"firstKeptEntryId,omitempty"`
	TokensBefore     float64         `json:"tokensBefore,omitempty"`
	FromID           string          `json:"fromId,omitempty"`
	Details          json.RawMessage `json:"details,omitempty"`
	FromHook         bool            `json:"fromHook,omitempty"`

	// custom (CustomType, Data) and custom_message (CustomType, Content,
	// Display, Details).
	CustomType string          `json:"customType,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	Display    bool            `json:"display,omitempty"`

	// label: a bookmark on TargetID; an empty Label removes it.
	TargetID string `json:"targetId,omitempty"`
	Label    string `json:"label,omitempty"`

	// session_info: the session's display name; the last one wins and an
	// empty one clears it.
	Name string `json:"name,omitempty"`

	// Where the entry is: its 1-based line number, the byte offset of the
	// line and the offset just past its LF.
	Line   int   `json:"-"`
	Offset int64 `json:"-"`
	End    int64 `json:"-"`
	// Raw is the complete line as pi wrote it (without the LF), for
	// forwarding entries verbatim.
	Raw json.RawMessage `json:"-"`
}

// Time parses Timestamp.
func (e Entry) Time() (time.Time, error) {
	return time.Parse(time.RFC3339Nano, e.Timestamp)
}

// parseHeader decodes the first line of a file.
func parseHeader(line []byte) (Header, error) {
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return Header{}, fmt.Errorf("%w: %v", ErrNotSession, err)
	}
	if h.Type != headerType {
		return Header{}, fmt.Errorf("%w: first line has type %q", ErrNotSession, h.Type)
	}
	return h, nil
}

// parseEntry decodes one entry line. It keeps a copy of the line in Raw.
func parseEntry(line []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, fmt.Errorf("%w: %v", ErrMalformedLine, err)
	}
	if err := checkEntry(string(e.Type), e.ID); err != nil {
		return Entry{}, err
	}
	if e.Type == TypeMessage && len(e.Message) > 0 {
		var m struct {
			Role string `json:"role"`
		}
		if err := json.Unmarshal(e.Message, &m); err != nil {
			return Entry{}, fmt.Errorf("%w: message: %v", ErrMalformedLine, err)
		}
		e.Role = m.Role
	}
	e.Raw = bytes.Clone(line)
	return e, nil
}

func checkEntry(typ, id string) error {
	switch {
	case typ == "":
		return fmt.Errorf("%w: entry has no type", ErrMalformedLine)
	case typ == headerType:
		return fmt.Errorf("%w: a second session header", ErrMalformedLine)
	case id == "":
		return fmt.Errorf("%w: %s entry has no id", ErrMalformedLine, typ)
	}
	return nil
}

// entryHead is the part of an entry a summary needs. Decoding into it skips
// the (large) message content without keeping it.
type entryHead struct {
	Type      string  `json:"type"`
	ID        string  `json:"id"`
	Timestamp string  `json:"timestamp"`
	Name      *string `json:"name"`
	Message   *struct {
		Role string `json:"role"`
	} `json:"message"`
}

// parseHead decodes the head of an entry; needID is false for version 1
// files, whose entries have no ids.
func parseHead(line []byte, needID bool) (entryHead, error) {
	var h entryHead
	if err := json.Unmarshal(line, &h); err != nil {
		return entryHead{}, fmt.Errorf("%w: %v", ErrMalformedLine, err)
	}
	id := h.ID
	if !needID && id == "" {
		id = "(v1)"
	}
	if err := checkEntry(h.Type, id); err != nil {
		return entryHead{}, err
	}
	return h, nil
}

// isBlank reports whether a line holds only JSON whitespace; pi skips
// such lines and so do we.
func isBlank(line []byte) bool {
	return len(bytes.TrimLeft(line, " \t\r\n")) == 0
}
