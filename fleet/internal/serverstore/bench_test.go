package serverstore

import (
	"fmt"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkDeliverNewTaskDone is the cost of one new report: the
// RecordTaskDone and MarkNotified transactions, each fsynced.
func BenchmarkDeliverNewTaskDone(b *testing.B) {
	st, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.PutTask(Task{TaskID: "t", InstanceID: "i", State: "running"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	seq := 0.0
	for b.Loop() {
		seq++
		td := TaskDone{TaskID: "t", InstanceID: "i", Seq: seq, Status: "settled", Summary: "ok"}
		if _, err := st.RecordTaskDone(td, nil); err != nil {
			b.Fatal(err)
		}
		if err := st.MarkNotified(td.Key()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDuplicateTaskDone is the cost of recognising a replay: a read
// transaction, no fsync.
func BenchmarkDuplicateTaskDone(b *testing.B) {
	st, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	td := TaskDone{TaskID: "t", InstanceID: "i", Seq: 1, Status: "settled", Summary: "ok"}
	if _, err := st.RecordTaskDone(td, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rc, err := st.RecordTaskDone(td, nil)
		if err != nil || !rc.Duplicate {
			b.Fatal(rc, err)
		}
	}
}

// BenchmarkConcurrentWrites is 20 writers storing a task each, at the
// same time: through the write queue (changes that wait together share a
// transaction, and an fsync), and with one bbolt transaction each (what
// every change did before the queue), in the same run. It reports the
// writes per commit.
func BenchmarkConcurrentWrites(b *testing.B) {
	for _, mode := range []string{"queued", "one_transaction_each"} {
		b.Run(mode, func(b *testing.B) {
			st, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var n atomic.Int64
			put := func(tx *Tx) error {
				_, err := tx.PutTask(Task{TaskID: fmt.Sprintf("t-%d", n.Add(1)), InstanceID: "i", State: "running"})
				return err
			}
			commits := st.w.commits.Load()
			b.SetParallelism(10) // 20 writers on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					if mode == "queued" {
						err = st.Update(put)
					} else {
						err = st.db.Update(func(tx *bolt.Tx) error { return put(&Tx{s: st, tx: tx}) })
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			if c := st.w.commits.Load() - commits; c > 0 {
				b.ReportMetric(float64(b.N)/float64(c), "writes/commit")
			}
		})
	}
}
