package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Mirror is the server's copy of the entries of one session file that lives
// on an agent's disk: the entries in the file's order, one per line, each
// byte for byte as pi wrote it (the header is not part of it). It grows
// only by Append, which refuses an entry id it already holds, so a catch-up
// that asks for "the entries after the last one I have" can neither
// duplicate nor skip one.
//
// The mirror's own file is its cursor: LastEntryID is the id of its last
// complete line, so there is no second record that a crash could leave
// out of step. Appends are not synced one by one (a catch-up runs after
// every settle): a crash may lose the latest ones, and the next catch-up
// fetches them again from where the file ends; a torn last line (the
// server died while appending) is cut off when the mirror is opened. Sync
// makes the appends so far durable. A Mirror is safe for concurrent use.
type Mirror struct {
	mu   sync.Mutex
	path string
	fh   *os.File
	size int64
	ids  map[string]struct{}
	last string
}

// ErrMirrorConflict: entries given to Mirror.Append repeat an entry the
// mirror already holds (or each other): the caller asked from the wrong
// place; nothing was written.
var ErrMirrorConflict = errors.New("session: entry already mirrored")

// OpenMirror opens (creating it and its directory if needed) the mirror at
// path. A complete line that is not an entry is a *LineError wrapping
// ErrMalformedLine or ErrDuplicateEntry: the mirror is damaged and should be
// Reset and fetched again.
func OpenMirror(path string, opts ...Option) (*Mirror, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("session: mirror: %w", err)
	}
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session: mirror: %w", err)
	}
	m := &Mirror{path: path, fh: fh, ids: map[string]struct{}{}}
	if err := m.load(newConfig(opts)); err != nil {
		fh.Close()
		return nil, err
	}
	return m, nil
}

// load reads the entries back and cuts a torn last line.
func (m *Mirror) load(cfg config) error {
	r := newLineReader(m.fh, 0, 1, cfg.maxLine)
	defer r.release()
	for {
		line, start, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, errTooLong) {
			return r.tooLongError(m.path, start)
		}
		if err != nil {
			return fmt.Errorf("session: mirror %s: %w", m.path, err)
		}
		if isBlank(line) {
			m.size = r.off
			continue
		}
		h, err := parseHead(line, true)
		if err == nil {
			if _, dup := m.ids[h.ID]; dup {
				err = fmt.Errorf("%w: %s", ErrDuplicateEntry, h.ID)
			}
		}
		if err != nil {
			return &LineError{Path: m.path, Line: r.line, Offset: start, Err: err}
		}
		m.ids[h.ID] = struct{}{}
		m.last = h.ID
		m.size = r.off
	}
	// Everything after the last complete line is a torn append.
	if err := m.fh.Truncate(m.size); err != nil {
		return fmt.Errorf("session: mirror: %w", err)
	}
	return nil
}

// Path returns the mirror's file.
func (m *Mirror) Path() string { return m.path }

// LastEntryID returns the id of the last mirrored entry; "" when none.
func (m *Mirror) LastEntryID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Len returns how many entries the mirror holds.
func (m *Mirror) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ids)
}

// Append adds entries, each a JSON object with a type and an id, in order.
// It checks them all before writing any: an invalid entry is an error
// wrapping ErrMalformedLine, an id already mirrored (or given twice) one
// wrapping ErrMirrorConflict, and nothing is written. The lines are
// written in one call, and not synced (see Sync).
func (m *Mirror) Append(entries []json.RawMessage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fh == nil {
		return fmt.Errorf("session: mirror %s is closed", m.path)
	}
	var buf bytes.Buffer
	ids := make([]string, 0, len(entries))
	batch := make(map[string]struct{}, len(entries))
	for i, raw := range entries {
		line := raw
		if bytes.ContainsAny(line, "\r\n") {
			// Whitespace between tokens only (a string cannot hold a raw
			// newline): keep the entry on one line.
			var c bytes.Buffer
			if err := json.Compact(&c, raw); err != nil {
				return fmt.Errorf("%w: entry %d: %v", ErrMalformedLine, i, err)
			}
			line = c.Bytes()
		}
		h, err := parseHead(line, true)
		if err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if _, dup := m.ids[h.ID]; dup {
			return fmt.Errorf("%w: %s", ErrMirrorConflict, h.ID)
		}
		if _, dup := batch[h.ID]; dup {
			return fmt.Errorf("%w: %s given twice", ErrMirrorConflict, h.ID)
		}
		batch[h.ID] = struct{}{}
		ids = append(ids, h.ID)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := m.fh.WriteAt(buf.Bytes(), m.size); err != nil {
		return m.undo(err)
	}
	m.size += int64(buf.Len())
	for _, id := range ids {
		m.ids[id] = struct{}{}
	}
	m.last = ids[len(ids)-1]
	return nil
}

// undo cuts a failed append off again.
func (m *Mirror) undo(err error) error {
	if terr := m.fh.Truncate(m.size); terr != nil {
		err = errors.Join(err, terr)
	}
	return fmt.Errorf("session: mirror %s: %w", m.path, err)
}

// Tail returns the last n mirrored entries, oldest first, each byte for
// byte as mirrored; more reports that older ones exist. n <= 0 returns
// none. It reads the file backwards from its end, so the cost grows with
// what it returns, not with the session.
func (m *Mirror) Tail(n int) (entries []json.RawMessage, more bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fh == nil {
		return nil, false, fmt.Errorf("session: mirror %s is closed", m.path)
	}
	if n <= 0 {
		return nil, len(m.ids) > 0, nil
	}
	const chunk = 64 << 10
	var (
		buf []byte // the bytes read so far, from off to m.size
		off = m.size
	)
	for off > 0 && bytes.Count(buf, []byte{'\n'}) <= n {
		step := min(int64(chunk), off)
		off -= step
		b := make([]byte, step, int(step)+len(buf))
		if _, err := m.fh.ReadAt(b, off); err != nil {
			return nil, false, fmt.Errorf("session: mirror %s: %w", m.path, err)
		}
		buf = append(b, buf...)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf, []byte{'\n'}), []byte{'\n'})
	if off > 0 {
		lines = lines[1:] // the first may be cut by the chunk boundary
	}
	var out []json.RawMessage
	for _, l := range lines {
		if !isBlank(l) {
			out = append(out, json.RawMessage(l))
		}
	}
	if len(out) > n {
		out, more = out[len(out)-n:], true
	}
	if off > 0 {
		more = true
	}
	return out, more, nil
}

// Sync makes every append so far durable.
func (m *Mirror) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fh == nil {
		return fmt.Errorf("session: mirror %s is closed", m.path)
	}
	if err := m.fh.Sync(); err != nil {
		return fmt.Errorf("session: mirror %s: %w", m.path, err)
	}
	return nil
}

// Reset empties the mirror (the source file was replaced: its entries are
// fetched again from the start).
func (m *Mirror) Reset() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fh == nil {
		return fmt.Errorf("session: mirror %s is closed", m.path)
	}
	if err := m.fh.Truncate(0); err != nil {
		return fmt.Errorf("session: mirror: %w", err)
	}
	if err := m.fh.Sync(); err != nil {
		return fmt.Errorf("session: mirror: %w", err)
	}
	m.size, m.last = 0, ""
	clear(m.ids)
	return nil
}

// Close syncs and closes the mirror's file.
func (m *Mirror) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fh == nil {
		return nil
	}
	err := errors.Join(m.fh.Sync(), m.fh.Close())
	m.fh = nil
	return err
}
