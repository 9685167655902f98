package agentstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/internal/boltfile"
	"example.com/pifleet/transport"
)

func TestInstances(t *testing.T) {
	c := newClock()
	dir := t.TempDir()
	s := openAt(t, dir, c)
	maxCost := 3.0
	full := Instance{
		InstanceID: "i-b", Cwd: "/work/api", Bundle: "default", BundleHash: "sha256:ab",
		Model:       &Model{Provider: "anthropic", ID: "claude", Thinking: "high"},
		SessionPath: "/home/u/.pi/agent/sessions/x.jsonl", State: transport.InstanceRunning,
		TaskID: "t1", TaskOwner: "conn-a", TraceID: "tr-1",
		Shim:   &Shim{Socket: "/run/pifleet/i-b.sock", Token: "tok", ShimPID: 10, WorkerPID: 11, PGID: 9, StartedAt: c.Now()},
		Budget: Budget{MaxCost: &maxCost, Spent: 1.5},
	}
	stored, err := s.PutInstance(full)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.CreatedAt.Equal(c.Now()) || !stored.UpdatedAt.Equal(c.Now()) {
		t.Errorf("timestamps = %v / %v, want now", stored.CreatedAt, stored.UpdatedAt)
	}
	c.Add(time.Second)
	if _, err := s.PutInstance(Instance{InstanceID: "i-a", Cwd: "/w", State: transport.InstanceExited}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openAt(t, dir, c)
	defer s.Close()
	got, err := s.Instance("i-b")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored, got); diff != "" {
		t.Errorf("record after reopen (-put +got):\n%s", diff)
	}
	list, err := s.Instances()
	if err != nil {
		t.Fatal(err)
	}
	if ids := []string{list[0].InstanceID, list[1].InstanceID}; !cmp.Equal(ids, []string{"i-b", "i-a"}) {
		t.Errorf("list order = %v, want oldest first", ids)
	}

	c.Add(time.Second)
	updated, err := s.UpdateInstance("i-b", func(in *Instance) error {
		in.State, in.Budget.Exceeded = transport.InstanceStopped, true
		return nil
	})
	if err != nil || updated.State != transport.InstanceStopped || !updated.UpdatedAt.Equal(c.Now()) || !updated.CreatedAt.Equal(stored.CreatedAt) {
		t.Errorf("update = %+v, %v", updated, err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateInstance("i-b", func(in *Instance) error { in.Cwd = "/changed"; return boom }); !errors.Is(err, boom) {
		t.Errorf("update with failing fn: err = %v, want boom", err)
	}
	if _, err := s.UpdateInstance("i-b", func(in *Instance) error { in.InstanceID = "x"; return nil }); !errors.Is(err, ErrInvalid) {
		t.Errorf("rename: err = %v, want ErrInvalid", err)
	}
	if got, _ := s.Instance("i-b"); got.Cwd != "/work/api" || got.InstanceID != "i-b" {
		t.Errorf("refused updates were written: %+v", got)
	}
	if _, err := s.UpdateInstance("nope", func(*Instance) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of a missing record: err = %v, want ErrNotFound", err)
	}

	if err := s.DeleteInstance("i-b"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteInstance("i-b"); err != nil {
		t.Errorf("second delete: %v", err)
	}
	if _, err := s.Instance("i-b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted record: err = %v, want ErrNotFound", err)
	}
	if _, err := s.PutInstance(Instance{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("put without id: err = %v, want ErrInvalid", err)
	}
}

func TestKV(t *testing.T) {
	s, _ := open(t, newClock())
	if err := s.PutKV("ring/i1", []byte("state")); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.GetKV("ring/i1"); string(v) != "state" || !ok || err != nil {
		t.Errorf("GetKV = %q, %v, %v", v, ok, err)
	}
	if err := s.PutKV("empty", nil); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.GetKV("empty"); len(v) != 0 || !ok || err != nil {
		t.Errorf("empty value: %q, %v, %v; want present and empty", v, ok, err)
	}
	if err := s.PutCursor("cursor/i1", 1<<40+7); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Cursor("cursor/i1"); v != 1<<40+7 || !ok || err != nil {
		t.Errorf("Cursor = %d, %v, %v", v, ok, err)
	}
	if _, _, err := s.Cursor("ring/i1"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Cursor of a non-counter: err = %v, want ErrCorrupt", err)
	}
	if _, ok, err := s.Cursor("missing"); ok || err != nil {
		t.Errorf("missing cursor: %v, %v", ok, err)
	}
	if err := s.DeleteKV("ring/i1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.GetKV("ring/i1"); ok {
		t.Error("deleted key still present")
	}
	for _, key := range []string{"", strings.Repeat("k", MaxKeyBytes+1)} {
		if err := s.PutKV(key, []byte("v")); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutKV(key of %d bytes): err = %v, want ErrInvalid", len(key), err)
		}
	}
}

func TestOpenLocked(t *testing.T) {
	_, dir := open(t, newClock())
	_, err := Open(dir, WithLockTimeout(50*time.Millisecond))
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: err = %v, want ErrLocked", err)
	}
}

func TestOpenRefusesOtherLayout(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, newClock())
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(boltfile.LayoutKey, []byte("99")) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(dir)
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Got != "99" {
		t.Errorf("Open of a layout-99 file: err = %v, want a *VersionError", err)
	}
}

func TestOpenCreatesPrivateState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "agent")
	s := openAt(t, dir, newClock())
	defer s.Close()
	if s.Path() != filepath.Join(dir, FileName) {
		t.Errorf("Path = %q", s.Path())
	}
	for _, p := range []string{dir, s.Path()} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: group or others have access", p, fi.Mode().Perm())
		}
	}
}
