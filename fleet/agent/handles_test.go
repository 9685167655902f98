package agent

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/fleet/agent/internal/worker"
)

// A handle written without fsync reads back whole, a rewrite (shorter or
// not) replaces it, the directory holds nothing else, and remove forgets
// it.
func TestHandleFilesRoundTrip(t *testing.T) {
	h := newHandleFiles(t.TempDir())
	if _, ok, err := h.get("i-000000000001"); ok || err != nil {
		t.Fatalf("get before put = %v, %v", ok, err)
	}
	first := worker.Persisted{InstanceID: "i-000000000001", Socket: "/s", Token: "t", LastSeq: 3, RunOpen: true}
	first.SessionPath = "/a/long/session/path/that/the/next/handle/does/not/have.jsonl"
	second := first
	second.LastSeq, second.RunOpen, second.SessionPath = 9, false, ""
	for _, p := range []worker.Persisted{first, second} {
		if err := h.put(p.InstanceID, func() worker.Persisted { return p }); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := h.get("i-000000000001")
	if err != nil || !ok {
		t.Fatalf("get = %v, %v", ok, err)
	}
	if diff := cmp.Diff(second, got); diff != "" {
		t.Errorf("handle (-want +got):\n%s", diff)
	}
	entries, err := os.ReadDir(h.dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "i-000000000001.json" {
		t.Fatalf("dir holds %v (%v), want only the handle", entries, err)
	}
	// After a restart (sizes unknown) a shorter handle still replaces a
	// longer one whole.
	third := second
	third.Socket, third.Token = "", ""
	h = newHandleFiles(h.dir)
	if err := h.put(third.InstanceID, func() worker.Persisted { return third }); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := h.get("i-000000000001"); err != nil || !ok || !cmp.Equal(third, got) {
		t.Fatalf("after a restart: %+v, %v, %v; want %+v", got, ok, err, third)
	}
	if err := h.remove("i-000000000001"); err != nil {
		t.Fatal(err)
	}
	if err := h.remove("i-000000000001"); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if _, ok, _ := h.get("i-000000000001"); ok {
		t.Fatal("handle still there after remove")
	}
	// The file kept open for writes went with the handle: a new handle of
	// the same id lands in a new file, not in the removed one.
	if err := h.put(first.InstanceID, func() worker.Persisted { return first }); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := h.get("i-000000000001"); err != nil || !ok || !cmp.Equal(first, got) {
		t.Fatalf("after remove and put: %+v, %v, %v; want %+v", got, ok, err, first)
	}
	h.close()
	if got, ok, err := newHandleFiles(h.dir).get("i-000000000001"); err != nil || !ok || !cmp.Equal(first, got) {
		t.Fatalf("after close: %+v, %v, %v; want %+v", got, ok, err, first)
	}
}

// An id that would leave the directory is refused, typed.
func TestHandleFilesRefusesPathIDs(t *testing.T) {
	h := newHandleFiles(t.TempDir())
	for _, id := range []string{"", ".", "..", "../x", "a/b", `a\b`, "a\x00b"} {
		err := h.put(id, func() worker.Persisted { return worker.Persisted{} })
		if !errors.Is(err, errBadInstanceID) {
			t.Errorf("put(%q) = %v, want errBadInstanceID", id, err)
		}
		if _, _, err := h.get(id); !errors.Is(err, errBadInstanceID) {
			t.Errorf("get(%q) = %v, want errBadInstanceID", id, err)
		}
	}
}

// A torn handle (a machine crash before the page cache reached the disk)
// reads as an error, which persistedWorker treats as no handle: the
// worker is reported lost rather than adopted from garbage.
func TestHandleFilesTornFileIsAnError(t *testing.T) {
	h := newHandleFiles(t.TempDir())
	if err := os.WriteFile(h.dir+"/i-000000000002.json", []byte(`{"instanceId":"i-0`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := h.get("i-000000000002"); ok || err == nil {
		t.Fatalf("get of a torn handle = %v, %v; want an error", ok, err)
	}
}

// FuzzHandleFile: a handle file of any content (a crash mid-write, a
// disk error, someone else's file) reads back as a handle or an error,
// never a panic; a handle written reads back equal.
func FuzzHandleFile(f *testing.F) {
	f.Add([]byte(`{"socket":"/run/s.sock","pid":12,"generation":1}`))
	f.Add([]byte(`{"socket":`))
	f.Add([]byte("\x00\x00\x00"))
	f.Add([]byte(`{"pid":"x"}   `))
	dir := f.TempDir()
	h := newHandleFiles(dir)
	f.Cleanup(h.close)
	f.Fuzz(func(t *testing.T, content []byte) {
		if err := os.WriteFile(filepath.Join(dir, "i-fuzz.json"), content, 0o600); err != nil {
			t.Fatal(err)
		}
		p, ok, err := h.get("i-fuzz")
		if err != nil || !ok {
			return
		}
		if err := h.put("i-back", func() worker.Persisted { return p }); err != nil {
			t.Fatal(err)
		}
		back, ok, err := h.get("i-back")
		if err != nil || !ok || !reflect.DeepEqual(back, p) {
			t.Fatalf("round trip of %+v: %+v, %v, %v", p, back, ok, err)
		}
		h.remove("i-back")
	})
}
