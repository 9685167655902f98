package serverstore

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"example.com/pifleet/internal/boltfile/boltfiletest"
)

// populated writes a server state file with a record of every kind into
// dir and closes it.
func populated(t *testing.T, dir string) {
	t.Helper()
	st, err := Open(dir, WithClock(newClock().now))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 30 {
		id := fmt.Sprintf("t-%02d", i)
		if _, err := st.PutTask(Task{TaskID: id, InstanceID: "i-1", Machine: "box", Prompt: strings.Repeat("work ", 40), State: "running"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordTaskDone(report(id, float64(1000+i)), nil); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := st.MarkNotified(report(id, float64(1000+i)).Key()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := st.PutInstance(Instance{InstanceID: "i-1", Machine: "box", Cwd: "/work", Bundle: "default", State: "idle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutAgent(Agent{Name: "box", Addresses: []string{"127.0.0.1:9788"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutProjection("box", []byte(`{"sessions":[]}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSpawnIntent(SpawnIntent{SpawnID: "spawn-1", Machine: "box", Cwd: "/work", Bundle: "default"}); err != nil {
		t.Fatal(err)
	}
}

// Every corruption of server.db is a *CorruptFileError naming the file —
// no panic, no empty start — and WithResetCorrupt moves it aside and
// starts afresh (#16 defect 7).
func TestOpenRefusesACorruptStateFile(t *testing.T) {
	records := []boltfiletest.Record{
		{Bucket: bucketTasks, Key: []byte("t-03")},
		{Bucket: bucketInstances, Key: []byte("i-1")},
		{Bucket: bucketAgents, Key: []byte("box")},
		{Bucket: bucketProjections, Key: []byte("box")},
		{Bucket: bucketDeliveries, Key: report("t-03", 1003).Key().encode()},
		{Bucket: bucketPendingIdx, Key: orderKey(2)},
		{Bucket: bucketMeta, Key: keyNotifiedCount},
		{Bucket: bucketSpawns, Key: []byte("spawn-1")},
	}
	boltfiletest.Refuses(t, boltfiletest.Store{
		File:     FileName,
		Populate: populated,
		Open: func(dir string, onReset func(string, error)) (io.Closer, error) {
			if onReset != nil {
				return Open(dir, WithResetCorrupt(onReset))
			}
			return Open(dir)
		},
		Empty: func(t *testing.T, opened io.Closer) bool {
			tasks, err := opened.(*Store).ListTasks()
			return err == nil && len(tasks) == 0
		},
	}, boltfiletest.Corruptions(bucketMeta, allBuckets, records...))
}
