package session

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Kind classifies a session by its name.
type Kind string

// The kinds of session.
const (
	KindBaseline Kind = "baseline" // named "baseline:<repo>": a primed, pinned starting point
	KindTask     Kind = "task"     // named "task:<taskId>:<slug>": a clone working on one task
	KindScratch  Kind = "scratch"  // anything else
)

// Valid reports whether k is one of the three kinds.
func (k Kind) Valid() bool {
	return k == KindBaseline || k == KindTask || k == KindScratch
}

// Millis is a time as milliseconds since the Unix epoch, the wire's
// updatedAt. It encodes as an integer and decodes any JSON number, because
// the TypeScript agent sends fractional milliseconds.
type Millis int64

// MillisOf converts t.
func MillisOf(t time.Time) Millis { return Millis(t.UnixMilli()) }

// Time converts m back.
func (m Millis) Time() time.Time { return time.UnixMilli(int64(m)) }

// UnmarshalJSON accepts any JSON number and truncates it to whole
// milliseconds.
func (m *Millis) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1<<62 {
		return fmt.Errorf("session: updatedAt %s is not a millisecond time", b)
	}
	*m = Millis(math.Floor(f))
	return nil
}

var _ json.Unmarshaler = (*Millis)(nil)

// UnknownCwd is the cwd reported for a session whose header has none, as the
// TypeScript agent does.
const UnknownCwd = "(unknown)"

// SessionInfo is the protocol's SessionInfo, the element of a
// sessions_report. An agent fills SessionID, Path, Name, Cwd, Kind, Pinned,
// ParentSession and UpdatedAt; the other fields belong to the server (see
// Record). Pinned is always encoded, false included, as the TypeScript
// schema requires.
type SessionInfo struct {
	// SessionID is pi's session id: the header's id (a UUIDv7), which is
	// also what get_state and get_session_stats report, so a live worker
	// and its file join on it. Files without a header id use the file
	// name without ".jsonl". See Lister for duplicates.
	SessionID          string   `json:"sessionId"`
	Path               string   `json:"path"`
	Name               string   `json:"name,omitempty"`
	Cwd                string   `json:"cwd"`
	Kind               Kind     `json:"kind"`
	Pinned             bool     `json:"pinned"`
	ParentSession      string   `json:"parentSession,omitempty"`
	Bundle             string   `json:"bundle,omitempty"`
	BundleHash         string   `json:"bundleHash,omitempty"`
	GitHead            string   `json:"gitHead,omitempty"`
	TaskIDs            []string `json:"taskIds,omitempty"`
	Labels             []string `json:"labels,omitempty"`
	UpdatedAt          Millis   `json:"updatedAt"`
	AttachedInstanceID string   `json:"attachedInstanceId,omitempty"`
}
