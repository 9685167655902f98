package agentstore

import (
	"fmt"
	"io"
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
	boltfiletest.Refuses(t, boltfiletest.Store{
		File:     FileName,
		Populate: func(t *testing.T, dir string) { populated(t, dir) },
		Open: func(dir string, onReset func(string, error)) (io.Closer, error) {
			if onReset != nil {
				return Open(dir, WithResetCorrupt(onReset))
			}
			return Open(dir)
		},
		Empty: func(t *testing.T, opened io.Closer) bool {
			list, err := opened.(*Store).Instances()
			return err == nil && len(list) == 0
		},
	}, boltfiletest.Corruptions(bucketMeta, allBuckets, records...))
}
