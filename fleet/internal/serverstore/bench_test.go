package serverstore

import (
	"testing"
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
