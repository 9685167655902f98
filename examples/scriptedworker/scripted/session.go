package scripted

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Session files are pi's JSONL v3: a header line, then entries chained by
// parentId. Like pi, a new file is written only once the first assistant
// message exists (then every entry so far at once, then one line per
// entry).

const sessionVersion = 3

type sessionHeader struct {
	Type          string `json:"type"`
	Version       int    `json:"version"`
	ID            string `json:"id"`
	Timestamp     string `json:"timestamp"`
	Cwd           string `json:"cwd"`
	ParentSession string `json:"parentSession,omitempty"`
}

// entry is one session entry. Only the fields of its type are set.
type entry struct {
	Type      string
	ID        string
	ParentID  string // "" for the first entry
	Timestamp string

	Message       *message        // message
	Provider      string          // model_change
	ModelID       string          // model_change
	ThinkingLevel string          // thinking_level_change
	Name          string          // session_info
	CustomType    string          // custom
	Data          any             // custom
	Summary       string          // compaction
	FirstKeptID   string          // compaction
	TokensBefore  int             // compaction
	Details       any             // compaction
	FromHook      bool            // compaction
	raw           json.RawMessage // entries of other types, kept as read
}

func (e *entry) MarshalJSON() ([]byte, error) {
	if e.raw != nil {
		return e.raw, nil
	}
	return e.obj().appendJSON(nil)
}

// obj is the entry as pi writes it (an entry read with raw set has none).
func (e *entry) obj() obj {
	var parent any = jsonNull
	if e.ParentID != "" {
		parent = e.ParentID
	}
	head := obj{{"type", e.Type}, {"id", e.ID}, {"parentId", parent}, {"timestamp", e.Timestamp}}
	switch e.Type {
	case "message":
		head = append(head, field{"message", e.Message})
	case "model_change":
		head = append(head, field{"provider", e.Provider}, field{"modelId", e.ModelID})
	case "thinking_level_change":
		head = append(head, field{"thinkingLevel", e.ThinkingLevel})
	case "session_info":
		head = append(head, field{"name", e.Name})
	case "custom":
		head = append(head, field{"customType", e.CustomType}, field{"data", e.Data})
	case "compaction":
		head = append(head, field{"summary", e.Summary}, field{"firstKeptEntryId", e.FirstKeptID},
			field{"tokensBefore", e.TokensBefore}, field{"details", e.Details}, field{"fromHook", e.FromHook})
	}
	return head
}

func (e *entry) UnmarshalJSON(b []byte) error {
	var w struct {
		Type          string          `json:"type"`
		ID            string          `json:"id"`
		ParentID      *string         `json:"parentId"`
		Timestamp     string          `json:"timestamp"`
		Message       *message        `json:"message"`
		Provider      string          `json:"provider"`
		ModelID       string          `json:"modelId"`
		ThinkingLevel string          `json:"thinkingLevel"`
		Name          string          `json:"name"`
		CustomType    string          `json:"customType"`
		Data          json.RawMessage `json:"data"`
		Summary       string          `json:"summary"`
		FirstKeptID   string          `json:"firstKeptEntryId"`
		TokensBefore  int             `json:"tokensBefore"`
		Details       json.RawMessage `json:"details"`
		FromHook      bool            `json:"fromHook"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = entry{Type: w.Type, ID: w.ID, Timestamp: w.Timestamp, Message: w.Message, Provider: w.Provider,
		ModelID: w.ModelID, ThinkingLevel: w.ThinkingLevel, Name: w.Name, CustomType: w.CustomType,
		Summary: w.Summary, FirstKeptID: w.FirstKeptID, TokensBefore: w.TokensBefore, FromHook: w.FromHook}
	if w.ParentID != nil {
		e.ParentID = *w.ParentID
	}
	if len(w.Data) > 0 {
		e.Data = w.Data
	}
	if len(w.Details) > 0 {
		e.Details = w.Details
	}
	switch w.Type {
	case "message", "model_change", "thinking_level_change", "session_info", "custom", "compaction":
	default:
		e.raw = append(json.RawMessage(nil), b...)
	}
	return nil
}

// session is the open session: its file (if any) and its entries.
type session struct {
	dir     string // where new files go ("" when not persisting)
	path    string // the file ("" when not persisting)
	header  sessionHeader
	entries []*entry
	byID    map[string]*entry
	leaf    string
	flushed bool   // the file holds every entry
	named   *entry // the last session_info entry: get_state reads it at every settle
}

func isoNow() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

// newUUIDv7 returns a time-ordered UUID, as pi's session ids are.
func newUUIDv7() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ms[2:])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newSession starts an empty session whose file will be created in dir
// (dir "" keeps it in memory).
func newSession(dir, cwd, parent string) *session {
	s := &session{dir: dir, byID: map[string]*entry{}}
	s.header = sessionHeader{Type: "session", Version: sessionVersion, ID: newUUIDv7(), Timestamp: isoNow(), Cwd: cwd, ParentSession: parent}
	if dir != "" {
		name := strings.NewReplacer(":", "-", ".", "-").Replace(s.header.Timestamp) + "_" + s.header.ID + ".jsonl"
		s.path = filepath.Join(dir, name)
	}
	return s
}

// openSession reads a session file. A missing file becomes a new session
// at that path (like pi's --session <path>).
func openSession(path, cwd string) (*session, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(abs)
	if errors.Is(err, os.ErrNotExist) {
		s := newSession(filepath.Dir(abs), cwd, "")
		s.path = abs
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := &session{dir: filepath.Dir(abs), path: abs, byID: map[string]*entry{}, flushed: true}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if first {
			if err := json.Unmarshal(line, &s.header); err != nil || s.header.Type != "session" {
				return nil, fmt.Errorf("%s: not a pi session file (bad header)", abs)
			}
			first = false
			continue
		}
		e := new(entry)
		if err := json.Unmarshal(line, e); err != nil {
			continue // pi skips lines it cannot parse
		}
		s.add(e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", abs, err)
	}
	if first {
		return nil, fmt.Errorf("%s: empty session file", abs)
	}
	return s, nil
}

// findSession resolves --session <id prefix> in dir.
func findSession(dir, idPrefix string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(dir, "*_"+idPrefix+"*.jsonl"))
	if len(matches) == 0 {
		return "", fmt.Errorf("no session matching %q in %s", idPrefix, dir)
	}
	return matches[len(matches)-1], nil
}

func (s *session) newEntryID() string {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		if s.byID[id] == nil {
			return id
		}
	}
}

// append adds e as a child of the leaf and persists it.
func (s *session) append(e *entry) (*entry, error) {
	e.ID = s.newEntryID()
	e.ParentID = s.leaf
	e.Timestamp = isoNow()
	s.add(e)
	return e, s.persist(e)
}

func (s *session) hasAssistant() bool {
	for _, e := range s.entries {
		if e.Type == "message" && e.Message != nil && e.Message.Role == "assistant" {
			return true
		}
	}
	return false
}

func (s *session) persist(e *entry) error {
	if s.path == "" {
		return nil
	}
	if !s.flushed {
		if !s.hasAssistant() {
			return nil
		}
		s.flushed = true
		return s.writeAll()
	}
	return appendLines(s.path, e)
}

// writeAll writes the header and every entry (a new file).
func (s *session) writeAll() error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return err
	}
	records := []any{s.header}
	for _, e := range s.entries {
		records = append(records, e)
	}
	return appendLines(s.path, records...)
}

func appendLines(path string, records ...any) error {
	var b []byte
	for _, r := range records {
		var err error
		if b, err = appendJSON(b, r); err != nil {
			return err
		}
		b = append(b, '\n')
	}
	return appendFile(path, b)
}

// appendFile is Node's appendFileSync: open, write, close, no fsync. The
// raw syscalls spare the five more that os.OpenFile spends on every open
// (it tries to register a regular file with the network poller).
func appendFile(path string, b []byte) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err == nil && n == 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			syscall.Close(fd)
			return &os.PathError{Op: "write", Path: path, Err: err}
		}
		b = b[n:]
	}
	if err := syscall.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: path, Err: err}
	}
	return nil
}

// compactedSince reports whether the active branch has a compaction entry
// after the entry that holds m (or, when no entry holds m, any compaction).
func (s *session) compactedSince(m *message) bool {
	for e := s.byID[s.leaf]; e != nil; e = s.byID[e.ParentID] {
		switch {
		case e.Type == "compaction":
			return true
		case e.Message == m:
			return false
		}
		if e.ParentID == "" {
			break
		}
	}
	return false
}

// branch returns the entries from the root to id.
func (s *session) branch(id string) []*entry {
	var path []*entry
	for e := s.byID[id]; e != nil; e = s.byID[e.ParentID] {
		path = append(path, e)
		if e.ParentID == "" {
			break
		}
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

// context rebuilds the messages the model sees on the active branch: after
// the latest compaction, its summary and the kept messages.
func (s *session) context() []*message {
	path := s.branch(s.leaf)
	start := 0
	var summary *message
	for i, e := range path {
		if e.Type == "compaction" {
			ts, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
			summary = &message{Role: "compactionSummary", Summary: e.Summary, TokensBefore: e.TokensBefore, Timestamp: ts.UnixMilli()}
			start = i + 1
			for j, k := range path[:i] {
				if k.ID == e.FirstKeptID {
					start = j
					break
				}
			}
		}
	}
	var msgs []*message
	if summary != nil {
		msgs = append(msgs, summary)
	}
	for _, e := range path[start:] {
		if e.Type == "message" && e.Message != nil {
			msgs = append(msgs, e.Message)
		}
	}
	return msgs
}

// latest returns the value of the last entry of a type on the branch.
func (s *session) latest(typ string) *entry {
	path := s.branch(s.leaf)
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].Type == typ {
			return path[i]
		}
	}
	return nil
}

func (s *session) name() string {
	if s.named == nil {
		return ""
	}
	return s.named.Name
}

// add makes e the session's leaf.
func (s *session) add(e *entry) {
	s.entries = append(s.entries, e)
	s.byID[e.ID] = e
	s.leaf = e.ID
	if e.Type == "session_info" {
		s.named = e
	}
}

// fork writes a new session holding the branch up to leafID (the whole
// active branch for clone). Its header names this file as parentSession.
func (s *session) fork(leafID string) (*session, error) {
	n := newSession(s.dir, s.header.Cwd, s.path)
	if leafID != "" {
		for _, e := range s.branch(leafID) {
			n.add(e)
		}
	}
	if n.path != "" && n.hasAssistant() {
		n.flushed = true
		return n, n.writeAll()
	}
	return n, nil
}

// defaultSessionDir is pi's: $PI_CODING_AGENT_DIR/sessions/--<cwd>--.
func defaultSessionDir(cwd string) string {
	if d := os.Getenv("PI_CODING_AGENT_SESSION_DIR"); d != "" {
		return d
	}
	trimmed := cwd
	if strings.HasPrefix(trimmed, "/") || strings.HasPrefix(trimmed, "\\") {
		trimmed = trimmed[1:]
	}
	safe := strings.NewReplacer("/", "-", "\\", "-", ":", "-").Replace(trimmed)
	return filepath.Join(agentDir(), "sessions", "--"+safe+"--")
}

// agentDir is PI_CODING_AGENT_DIR, default ~/.pi/agent.
func agentDir() string {
	if d := os.Getenv("PI_CODING_AGENT_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".pi", "agent")
}
