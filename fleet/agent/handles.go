package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"example.com/pifleet/fleet/agent/internal/worker"
)

// handleFiles keeps each worker's re-adoption handle (worker.Persisted:
// shim socket, token, how far the stream got, whether a run is open) in a
// file of its own, <StateDir>/handles/<instance id>.json.
//
// The handle is rewritten at every run start and every settle, on the
// path of the worker's event stream, so the write is as cheap as a write
// can be: one pwrite over the old contents into a file kept open, no
// fsync, no rename. It only has to survive the agent process (a crash,
// kill -9, an upgrade), which the page cache does, and a single small
// write is never half done when a process dies. A machine crash that
// could tear or lose it also kills the shim and the worker it names, so a
// torn or missing handle then says the truth: the worker is lost (an
// unreadable handle reads as none).
//
// Measured alternatives on ext4: the database (a bbolt commit, two
// fdatasyncs) cost about 0.25 ms per write, two writes per prompt; a
// temporary file renamed over the old one about 0.1 ms, since ext4 starts
// writing back a file renamed over another; opening the file for every
// write five system calls instead of one. What must be durable before it
// is acknowledged (the task_done outbox, the instance registry) stays in
// the fsynced database.
type handleFiles struct {
	dir string

	mu    sync.Mutex // orders a snapshot with its write: the latest snapshot wins
	files map[string]*handleFile
}

// handleFile is one open handle file and the bytes it holds.
type handleFile struct {
	f    *os.File
	size int
}

func newHandleFiles(dir string) *handleFiles {
	return &handleFiles{dir: dir, files: map[string]*handleFile{}}
}

// errBadInstanceID is a handle asked for an id that cannot be a file name.
var errBadInstanceID = errors.New("agent: instance id cannot name a handle file")

func (h *handleFiles) path(id string) (string, error) {
	if id == "" || id == "." || id == ".." || strings.ContainsAny(id, `/\`+"\x00") {
		return "", fmt.Errorf("%w: %q", errBadInstanceID, id)
	}
	return filepath.Join(h.dir, id+".json"), nil
}

// put stores the handle that snapshot returns, taken under the lock so
// that two writers for one worker cannot store an older snapshot last.
// The JSON is padded with spaces to the old file's length, so one write
// replaces the whole of it without a truncate.
func (h *handleFiles) put(id string, snapshot func() worker.Persisted) error {
	path, err := h.path(id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b, err := json.Marshal(snapshot())
	if err != nil {
		return err
	}
	b = append(b, '\n')
	hf := h.files[id]
	if hf == nil {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		hf = &handleFile{f: f}
		if st, err := f.Stat(); err == nil {
			hf.size = int(st.Size())
		}
		h.files[id] = hf
	}
	for len(b) < hf.size {
		b = append(b, ' ')
	}
	if _, err := hf.f.WriteAt(b, 0); err != nil {
		// Opened afresh next time: the file may have been replaced.
		h.closeLocked(id)
		return err
	}
	hf.size = len(b)
	return nil
}

// closeLocked closes id's file, if open.
func (h *handleFiles) closeLocked(id string) {
	if hf := h.files[id]; hf != nil {
		hf.f.Close()
		delete(h.files, id)
	}
}

// close closes every open handle file; the handles stay on disk.
func (h *handleFiles) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.files {
		h.closeLocked(id)
	}
}

// get reads a handle; ok is false when there is none or it cannot be read.
func (h *handleFiles) get(id string) (p worker.Persisted, ok bool, err error) {
	path, err := h.path(id)
	if err != nil {
		return p, false, err
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, false, nil
	case err != nil:
		return p, false, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, false, fmt.Errorf("agent: handle %s: %w", path, err)
	}
	return p, true, nil
}

// ids lists the instance ids that have a handle file.
func (h *handleFiles) ids() []string {
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && e.Type().IsRegular() {
			if _, err := h.path(id); err == nil {
				out = append(out, id)
			}
		}
	}
	return out
}

// remove deletes a handle; a missing one is fine.
func (h *handleFiles) remove(id string) error {
	path, err := h.path(id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.closeLocked(id)
	h.mu.Unlock()
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
