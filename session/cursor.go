package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Cursor is a reader's position in a session file: the last entry it has
// seen and where that entry's line lies. Reading on from a cursor costs one
// seek and one validated line, not a scan of the file; only when the entry is
// no longer at its offset (the file was rewritten) is the file scanned for
// the id, and when the id is gone the read fails with ErrUnknownEntry so the
// caller can fall back to a full read.
//
// Catch-up through a cursor is exactly-once: every complete entry after the
// cursor is returned once, in file order, and an unterminated last line (pi
// still appending) is not returned until its LF is written.
//
// A Cursor is a plain value with JSON tags; it can be stored and resumed.
type Cursor struct {
	Path string `json:"path"`
	// SessionID is the header id of the file the cursor was made on; a
	// file with another id is a replaced file, not a continuation.
	SessionID string `json:"sessionId,omitempty"`
	// EntryID is the last entry seen; "" means none (start after the
	// header).
	EntryID string `json:"entryId,omitempty"`
	// Line, Offset and End locate EntryID's line: its number, its first
	// byte and the byte just past its LF, where reading goes on.
	Line   int   `json:"line,omitempty"`
	Offset int64 `json:"offset,omitempty"`
	End    int64 `json:"end,omitempty"`
}

// EntriesAfter returns every entry appended after entryID ("" for all the
// entries), in file order, and a cursor for reading on. An unknown entryID is
// an *UnknownEntryError (errors.Is ErrUnknownEntry). pi 0.73.1 has no
// get_entries command; this reads the file itself.
func EntriesAfter(path, entryID string, opts ...Option) ([]Entry, Cursor, error) {
	return Cursor{Path: path, EntryID: entryID}.Next(0, opts...)
}

// Next returns up to limit entries after the cursor (all when limit <= 0)
// and the cursor after the last one returned. When a line after the cursor
// is corrupt, Next returns the entries before it, the cursor after them and
// a *LineError naming the line, so nothing is skipped silently.
func (c Cursor) Next(limit int, opts ...Option) ([]Entry, Cursor, error) {
	cfg := newConfig(opts)
	fh, err := os.Open(c.Path)
	if err != nil {
		return nil, c, fmt.Errorf("session: %w", err)
	}
	defer fh.Close()
	r := newLineReader(fh, 0, 1, cfg.maxLine)
	defer r.release()
	h, headerEnd, err := readHeader(c.Path, r)
	if err != nil {
		return nil, c, err
	}
	if err := checkEntryVersion(c.Path, h); err != nil {
		return nil, c, err
	}
	if c.SessionID != "" && h.ID != c.SessionID {
		return nil, c, &UnknownEntryError{Path: c.Path, EntryID: c.EntryID,
			Reason: fmt.Sprintf("session id changed from %s to %s (file replaced)", c.SessionID, h.ID)}
	}
	pos := Cursor{Path: c.Path, SessionID: h.ID, Line: 1, Offset: headerEnd, End: headerEnd}
	if c.EntryID != "" {
		if c.resume(fh, r, headerEnd) {
			pos = c
			pos.SessionID = h.ID
		} else {
			if _, err := fh.Seek(headerEnd, io.SeekStart); err != nil {
				return nil, c, fmt.Errorf("session: %w", err)
			}
			r.reset(fh, headerEnd, 2)
			if pos, err = locate(c.Path, r, c.EntryID); err != nil {
				return nil, c, err
			}
			pos.SessionID = h.ID
		}
	}
	entries := []Entry{}
	for limit <= 0 || len(entries) < limit {
		e, err := nextEntry(c.Path, r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return entries, pos, err
		}
		entries = append(entries, e)
		pos = Cursor{Path: c.Path, SessionID: h.ID, EntryID: e.ID, Line: e.Line, Offset: e.Offset, End: e.End}
	}
	return entries, pos, nil
}

// resume checks that the cursor's entry is still at its offset and, if so,
// leaves r positioned just after it.
func (c Cursor) resume(fh *os.File, r *lineReader, headerEnd int64) bool {
	if c.Offset < headerEnd || c.End <= c.Offset || c.Line < 2 {
		return false
	}
	if _, err := fh.Seek(c.Offset, io.SeekStart); err != nil {
		return false
	}
	r.reset(fh, c.Offset, c.Line)
	line, _, err := r.next()
	if err != nil || r.off != c.End {
		return false
	}
	e, err := parseHead(line, true)
	return err == nil && e.ID == c.EntryID
}

// locate scans r (positioned after the header) for the entry with id and
// returns the cursor at it; r is left just after that entry.
func locate(path string, r *lineReader, id string) (Cursor, error) {
	needle, filter := plainJSONString(id)
	for {
		line, start, err := r.next()
		switch {
		case errors.Is(err, io.EOF):
			return Cursor{}, &UnknownEntryError{Path: path, EntryID: id, Reason: "not found"}
		case errors.Is(err, errTooLong):
			continue
		case err != nil:
			return Cursor{}, fmt.Errorf("session: reading %s: %w", path, err)
		}
		// Cheap filter: the id must appear as a JSON string on its line.
		if filter && !bytes.Contains(line, needle) {
			continue
		}
		if e, err := parseHead(line, true); err == nil && e.ID == id {
			return Cursor{Path: path, EntryID: id, Line: r.line, Offset: start, End: r.off}, nil
		}
	}
}

// plainJSONString returns s as a JSON string literal when s has only
// printable ASCII that no encoder escapes, so the literal is exactly what pi
// wrote; otherwise ok is false and callers must not filter on it.
func plainJSONString(s string) (lit []byte, ok bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return nil, false
		}
	}
	return []byte(`"` + s + `"`), true
}
