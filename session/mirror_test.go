package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func entryLine(id, parent, text string) json.RawMessage {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return json.RawMessage(`{"type":"message","id":"` + id + `","parentId":` + p +
		`,"timestamp":"2026-11-29T10:00:00.000Z","message":{"role":"user","content":"` + text + `"}}`)
}

func openMirror(t *testing.T, path string) *Mirror {
	t.Helper()
	m, err := OpenMirror(path)
	if err != nil {
		t.Fatalf("OpenMirror: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestMirrorAppendsAndReopensAtItsLastEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m", "s.jsonl")
	m := openMirror(t, path)
	if m.LastEntryID() != "" || m.Len() != 0 {
		t.Fatalf("new mirror: last %q, len %d", m.LastEntryID(), m.Len())
	}
	a, b, c := entryLine("aaaa0001", "", "one"), entryLine("aaaa0002", "aaaa0001", "two"), entryLine("aaaa0003", "aaaa0002", "three")
	if err := m.Append([]json.RawMessage{a, b}); err != nil {
		t.Fatal(err)
	}
	if err := m.Append([]json.RawMessage{c}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	got, _ := os.ReadFile(path)
	want := string(a) + "\n" + string(b) + "\n" + string(c) + "\n"
	if string(got) != want {
		t.Fatalf("mirror file:\n%s\nwant:\n%s", got, want)
	}
	m2 := openMirror(t, path)
	if m2.LastEntryID() != "aaaa0003" || m2.Len() != 3 {
		t.Fatalf("reopened: last %q, len %d", m2.LastEntryID(), m2.Len())
	}
}

func TestMirrorRefusesADuplicateAndWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	m := openMirror(t, path)
	if err := m.Append([]json.RawMessage{entryLine("e1", "", "x")}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	for name, batch := range map[string][]json.RawMessage{
		"already mirrored": {entryLine("e2", "e1", "y"), entryLine("e1", "", "x")},
		"twice in a batch": {entryLine("e3", "e1", "y"), entryLine("e3", "e1", "y")},
	} {
		if err := m.Append(batch); !errors.Is(err, ErrMirrorConflict) {
			t.Errorf("%s: err %v, want ErrMirrorConflict", name, err)
		}
	}
	if err := m.Append([]json.RawMessage{entryLine("e4", "e1", "y"), json.RawMessage(`{"type":"message"}`)}); !errors.Is(err, ErrMalformedLine) {
		t.Errorf("entry without id: err %v, want ErrMalformedLine", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) || m.LastEntryID() != "e1" || m.Len() != 1 {
		t.Fatalf("a refused append changed the mirror: %q → %q (last %q)", before, after, m.LastEntryID())
	}
}

func TestMirrorCutsATornAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	complete := string(entryLine("e1", "", "x")) + "\n" + string(entryLine("e2", "e1", "y")) + "\n"
	if err := os.WriteFile(path, []byte(complete+`{"type":"message","id":"e3","par`), 0o600); err != nil {
		t.Fatal(err)
	}
	m := openMirror(t, path)
	if m.LastEntryID() != "e2" || m.Len() != 2 {
		t.Fatalf("last %q, len %d; want e2, 2", m.LastEntryID(), m.Len())
	}
	if err := m.Append([]json.RawMessage{entryLine("e3", "e2", "z")}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := complete + string(entryLine("e3", "e2", "z")) + "\n"; string(got) != want {
		t.Fatalf("after the torn tail was cut and e3 appended:\n%s\nwant:\n%s", got, want)
	}
}

func TestMirrorReportsDamageAndResets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, []byte(string(entryLine("e1", "", "x"))+"\nnot json\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenMirror(path)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrMalformedLine) {
		t.Fatalf("damaged mirror: err %v, want a LineError at line 2 wrapping ErrMalformedLine", err)
	}
	if err := os.WriteFile(path, []byte(string(entryLine("e1", "", "x"))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := openMirror(t, path)
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 || m.LastEntryID() != "" || m.Len() != 0 {
		t.Fatalf("after Reset: size %d, last %q, len %d", fi.Size(), m.LastEntryID(), m.Len())
	}
	if err := m.Append([]json.RawMessage{entryLine("e1", "", "x")}); err != nil {
		t.Fatalf("the same entry again after Reset: %v", err)
	}
}

func TestMirrorKeepsAPrettyPrintedEntryOnOneLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	m := openMirror(t, path)
	if err := m.Append([]json.RawMessage{json.RawMessage("{\n  \"type\": \"label\",\n  \"id\": \"e1\"\n}")}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != `{"type":"label","id":"e1"}`+"\n" {
		t.Fatalf("got %q", got)
	}
}

// FuzzOpenMirror: whatever a mirror file holds, opening it either fails
// with a typed error or keeps exactly its complete entry lines, and an
// append afterwards is read back as the last entry.
func FuzzOpenMirror(f *testing.F) {
	f.Add([]byte(string(entryLine("e1", "", "x")) + "\n" + `{"type":"message","id":"e2"`))
	f.Add([]byte("\n\n" + string(entryLine("e1", "", "x")) + "\r\n"))
	f.Add([]byte(`{"type":"session","id":"s"}` + "\n"))
	f.Add([]byte(`{"type":"label","id":"e1"}` + "\n" + `{"type":"label","id":"e1"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := OpenMirror(path)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		defer m.Close()
		kept, _ := os.ReadFile(path)
		if !bytes.HasPrefix(data, kept) || (len(kept) > 0 && kept[len(kept)-1] != '\n') {
			t.Fatalf("kept %q of %q", kept, data)
		}
		id := "fz" + strings.Repeat("0", 6)
		if m.Len() > 0 && m.LastEntryID() == id {
			return
		}
		err = m.Append([]json.RawMessage{entryLine(id, "", "z")})
		if errors.Is(err, ErrMirrorConflict) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		m2, err := OpenMirror(path)
		if err != nil {
			t.Fatalf("reopen after append: %v", err)
		}
		defer m2.Close()
		if m2.LastEntryID() != id {
			t.Fatalf("last %q after appending %s", m2.LastEntryID(), id)
		}
	})
}

func TestMirrorTailReadsTheLastEntriesAcrossChunks(t *testing.T) {
	m := openMirror(t, filepath.Join(t.TempDir(), "s.jsonl"))
	if got, more, err := m.Tail(5); err != nil || len(got) != 0 || more {
		t.Fatalf("empty mirror: %d entries, more %v, %v", len(got), more, err)
	}
	// Entries of ~1 KiB, so that 300 of them span several 64 KiB chunks.
	pad := strings.Repeat("x", 1000)
	var all []json.RawMessage
	parent := ""
	for i := range 300 {
		id := fmt.Sprintf("%08x", i+1)
		all = append(all, entryLine(id, parent, fmt.Sprintf("%d %s", i, pad)))
		parent = id
	}
	if err := m.Append(all); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n    int
		want []json.RawMessage
		more bool
	}{
		{0, nil, true},
		{1, all[299:], true},
		{70, all[230:], true}, // crosses a chunk boundary
		{300, all, false},
		{1000, all, false},
	} {
		got, more, err := m.Tail(c.n)
		if err != nil {
			t.Fatalf("Tail(%d): %v", c.n, err)
		}
		if more != c.more || len(got) != len(c.want) {
			t.Fatalf("Tail(%d): %d entries, more %v; want %d, %v", c.n, len(got), more, len(c.want), c.more)
		}
		for i := range got {
			if !bytes.Equal(got[i], c.want[i]) {
				t.Fatalf("Tail(%d)[%d] = %.40s…, want %.40s…", c.n, i, got[i], c.want[i])
			}
		}
	}
}
