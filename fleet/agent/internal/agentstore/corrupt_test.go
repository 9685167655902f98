package agentstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/internal/boltfile/boltfiletest"
	"example.com/pifleet/transport"
)

// populated writes an agent state file with instances, outbox entries
// and kv values into dir and closes it.
func populated(t *testing.T, dir string) (entry Entry) {
	t.Helper()
	c := newClock()
	s := openAt(t, dir, c)
	defer s.Close()
	for i := range 20 {
		id := fmt.Sprintf("i-%02d", i)
		if _, err := s.PutInstance(Instance{InstanceID: id, Cwd: "/work/" + strings.Repeat("x", 80), State: transport.InstanceRunning}); err != nil {
			t.Fatal(err)
		}
		entry = mustPut(t, s, id, "t-"+id)
		c.Add(1)
	}
	if err := s.PutKV("pins", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	return entry
}

// Every corruption of agent.db is a *CorruptFileError naming the file —
// no panic, no empty start that would orphan live workers and lose
// unacknowledged task_done — and WithResetCorrupt moves it aside and
// starts afresh (#16 defect 7).
func TestOpenRefusesACorruptStateFile(t *testing.T) {
	dir := t.TempDir()
	last := populated(t, dir)
	records := []boltfiletest.Record{
		{Bucket: bucketInstances, Key: []byte("i-03")},
		{Bucket: bucketOutbox, Key: last.Seq.key()},
		{Bucket: bucketMeta, Key: keyLastSeq},
	}
	for _, c := range boltfiletest.Corruptions(bucketMeta, allBuckets, records...) {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			populated(t, dir)
			path := filepath.Join(dir, FileName)
			c.Damage(t, path)

			_, err := Open(dir)
			var ce *CorruptFileError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptFile) || ce.Path != path {
				t.Fatalf("open: %v, want a *CorruptFileError naming %s", err, path)
			}

			var moved string
			s, err := Open(dir, WithResetCorrupt(func(to string, _ error) { moved = to }))
			if err != nil {
				t.Fatalf("open with WithResetCorrupt: %v", err)
			}
			defer s.Close()
			if _, err := os.Stat(moved); err != nil || !strings.HasPrefix(filepath.Base(moved), FileName+".corrupt-") {
				t.Errorf("moved aside to %q: %v", moved, err)
			}
			if list, err := s.Instances(); err != nil || len(list) != 0 {
				t.Errorf("the fresh file lists %d instances (%v)", len(list), err)
			}
		})
	}
}
