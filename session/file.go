package session

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// File is a whole session file: its header, every entry in file order and
// the entry tree.
type File struct {
	Path    string
	Header  Header
	Entries []Entry
	Tree    *Tree
	// Torn reports an unterminated last line (pi was appending); it was
	// not read.
	Torn bool
}

// Name returns the session's display name (see Summary.Name).
func (f *File) Name() string {
	last := -1
	for i, e := range f.Entries {
		if e.Type == TypeSessionInfo {
			last = i
		}
	}
	if last < 0 {
		return strings.TrimSpace(f.Header.Name)
	}
	return strings.TrimSpace(f.Entries[last].Name)
}

// Read loads a whole session file, strictly: a corrupt or over-long line is a
// *LineError naming it, and so is a duplicate entry id, because the result
// must hold every entry. An unterminated last line is ignored (File.Torn).
// Use Summarize when counts are enough.
func Read(path string, opts ...Option) (*File, error) {
	cfg := newConfig(opts)
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	defer fh.Close()
	r := newLineReader(fh, 0, 1, cfg.maxLine)
	defer r.release()
	h, _, err := readHeader(path, r)
	if err != nil {
		return nil, err
	}
	if err := checkEntryVersion(path, h); err != nil {
		return nil, err
	}
	f := &File{Path: path, Header: h, Entries: []Entry{}}
	tree := newTree()
	for {
		e, err := nextEntry(path, r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if !tree.add(e.ID, e.ParentID) {
			return nil, &LineError{Path: path, Line: e.Line, Offset: e.Offset,
				Err: fmt.Errorf("%w: %q", ErrDuplicateEntry, e.ID)}
		}
		f.Entries = append(f.Entries, e)
	}
	f.Tree = tree
	f.Torn = r.torn
	return f, nil
}

func checkEntryVersion(path string, h Header) error {
	if v := h.EffectiveVersion(); v < minEntryVersion || v > CurrentVersion {
		return &LineError{Path: path, Line: 1,
			Err: fmt.Errorf("%w: version %d (entries are read for versions %d to %d)", ErrUnsupportedVersion, v, minEntryVersion, CurrentVersion)}
	}
	return nil
}

// nextEntry reads the next non-blank complete line as an entry.
func nextEntry(path string, r *lineReader) (Entry, error) {
	for {
		line, start, err := r.next()
		switch {
		case errors.Is(err, errTooLong):
			return Entry{}, r.tooLongError(path, start)
		case err != nil:
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("session: reading %s: %w", path, err)
			}
			return Entry{}, err
		case isBlank(line):
			continue
		}
		e, err := parseEntry(line)
		if err != nil {
			return Entry{}, &LineError{Path: path, Line: r.line, Offset: start, Err: err}
		}
		e.Line, e.Offset, e.End = r.line, start, r.off
		return e, nil
	}
}

// Summary describes a session file without keeping its entries.
type Summary struct {
	Path   string
	Header Header
	// Name is the name of the last session_info entry (trimmed; an empty
	// one clears the name, as in pi), or the header's name when the file
	// has no session_info entry (the TypeScript pi-fleet format).
	Name string
	// Leaf is the id of the last entry: pi's current position in the tree.
	Leaf string
	// Entries counts the entries read; ByType and Messages break them down
	// by entry type and by message role.
	Entries  int
	ByType   map[EntryType]int
	Messages map[string]int
	// LastTimestamp is the timestamp of the last entry (pi's clock), or the
	// header's when there is none.
	LastTimestamp string
	// Corrupt counts complete lines that are not valid entries (or are too
	// long); they are skipped. FirstCorrupt is the first of them.
	Corrupt      int
	FirstCorrupt *LineError
	// Size is the length of the complete lines; Torn reports an
	// unterminated last line after them.
	Size    int64
	Torn    bool
	ModTime time.Time
}

// Summarize streams a session file and returns its name, leaf and counts.
// Unlike Read it is tolerant: a corrupt line is counted in Summary.Corrupt
// and skipped, so that one bad line never hides a session. Only a missing
// or invalid header is an error. Memory is bounded by the longest line.
func Summarize(path string, opts ...Option) (Summary, error) {
	cfg := newConfig(opts)
	fh, err := os.Open(path)
	if err != nil {
		return Summary{}, fmt.Errorf("session: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return Summary{}, fmt.Errorf("session: %w", err)
	}
	r := newLineReader(fh, 0, 1, cfg.maxLine)
	defer r.release()
	h, _, err := readHeader(path, r)
	if err != nil {
		return Summary{}, err
	}
	s := Summary{
		Path: path, Header: h, ModTime: st.ModTime(), LastTimestamp: h.Timestamp,
		ByType: map[EntryType]int{}, Messages: map[string]int{},
	}
	var name *string
	needID := h.EffectiveVersion() >= minEntryVersion
	corrupt := func(le *LineError) {
		s.Corrupt++
		if s.FirstCorrupt == nil {
			s.FirstCorrupt = le
		}
	}
	for {
		line, start, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errTooLong) {
			corrupt(r.tooLongError(path, start))
			continue
		}
		if err != nil {
			return Summary{}, fmt.Errorf("session: reading %s: %w", path, err)
		}
		if isBlank(line) {
			continue
		}
		e, err := parseHead(line, needID)
		if err != nil {
			corrupt(&LineError{Path: path, Line: r.line, Offset: start, Err: err})
			continue
		}
		s.Entries++
		s.ByType[EntryType(e.Type)]++
		if e.Message != nil {
			s.Messages[e.Message.Role]++
		}
		if EntryType(e.Type) == TypeSessionInfo {
			n := ""
			if e.Name != nil {
				n = *e.Name
			}
			name = &n
		}
		s.Leaf = e.ID
		s.LastTimestamp = e.Timestamp
	}
	s.Name = resolveName(h, name)
	s.Size = r.off
	s.Torn = r.torn
	return s, nil
}

// resolveName applies pi's rule: the last session_info wins (trimmed, empty
// clears); without one, fall back to the header's name.
func resolveName(h Header, lastInfo *string) string {
	if lastInfo != nil {
		return strings.TrimSpace(*lastInfo)
	}
	return strings.TrimSpace(h.Name)
}
