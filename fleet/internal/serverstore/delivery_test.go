package serverstore

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRecordTaskDoneDeduplicates(t *testing.T) {
	st := openT(t, t.TempDir())
	td := report("t-1", 1_760_000_000_000)

	first, err := st.RecordTaskDone(td, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || first.Order != 1 {
		t.Fatalf("first receipt: %+v", first)
	}
	again, err := st.RecordTaskDone(td, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Notified || again.Order != 1 {
		t.Errorf("replay while the notification is pending: %+v", again)
	}
	if err := st.MarkNotified(td.Key()); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkNotified(td.Key()); err != nil {
		t.Errorf("marking twice: %v", err)
	}
	late, err := st.RecordTaskDone(td, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !late.Duplicate || !late.Notified {
		t.Errorf("replay after notification: %+v", late)
	}

	// A new seq of the same task (its next report, after a revision) is new.
	next, err := st.RecordTaskDone(report("t-1", td.Seq+1), nil)
	if err != nil || next.Duplicate || next.Order != 2 {
		t.Errorf("next report of the same task: %+v, %v", next, err)
	}
	// -0 and 0 are the same seq.
	if _, err := st.RecordTaskDone(report("t-0", 0), nil); err != nil {
		t.Fatal(err)
	}
	if rc, err := st.RecordTaskDone(report("t-0", math.Copysign(0, -1)), nil); err != nil || !rc.Duplicate {
		t.Errorf("seq -0 after seq 0: %+v, %v", rc, err)
	}
}

func TestKeysWithSeparatorsDoNotCollide(t *testing.T) {
	st := openT(t, t.TempDir())
	a := TaskDone{InstanceID: "i:1", TaskID: "t", Seq: 5, Status: "settled"}
	b := TaskDone{InstanceID: "i", TaskID: "1:t", Seq: 5, Status: "settled"}
	if a.Key().String() != b.Key().String() {
		t.Fatalf("the test needs keys that print alike: %s vs %s", a.Key(), b.Key())
	}
	for _, td := range []TaskDone{a, b} {
		rc, err := st.RecordTaskDone(td, nil)
		if err != nil || rc.Duplicate {
			t.Errorf("%+v: %+v, %v; want a new report", td, rc, err)
		}
	}
}

func TestPendingNotificationsSurviveReopenInReceiptOrder(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []DedupeKey
	for i, task := range []string{"t-b", "t-a", "t-c", "t-d"} {
		td := report(task, float64(100-i)) // neither key nor seq order is receipt order
		if _, err := st.RecordTaskDone(td, nil); err != nil {
			t.Fatal(err)
		}
		want = append(want, td.Key())
	}
	if err := st.MarkNotified(want[1]); err != nil {
		t.Fatal(err)
	}
	want = append(want[:1], want[2:]...)
	st.Close()

	st = openT(t, dir)
	pending, err := st.PendingNotifications()
	if err != nil {
		t.Fatal(err)
	}
	var got []DedupeKey
	for i, d := range pending {
		got = append(got, d.Key)
		if d.TaskDone == nil || d.TaskDone.Key() != d.Key || d.Notified {
			t.Errorf("pending[%d] = %+v", i, d)
		}
		if i > 0 && d.Order <= pending[i-1].Order {
			t.Errorf("pending not in receipt order: %d after %d", d.Order, pending[i-1].Order)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pending after reopen (-want +got):\n%s", d)
	}
	if d, ok, err := st.Delivery(want[0]); err != nil || !ok || d.TaskDone.Summary != "done t-b" {
		t.Errorf("delivery record: %+v %v %v", d, ok, err)
	}
}

func TestRecordTaskDoneUpdatesTheTaskInTheSameTransaction(t *testing.T) {
	clk := newClock()
	st := openT(t, t.TempDir(), WithClock(clk.now))
	if _, err := st.PutTask(Task{TaskID: "t-1", InstanceID: "i-1", State: "running"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutInstance(Instance{InstanceID: "i-1", Machine: "m", State: "running"}); err != nil {
		t.Fatal(err)
	}
	toReview := func(tx *Tx) error {
		task, _, err := tx.Task("t-1")
		if err != nil {
			return err
		}
		task.State = "awaiting_review"
		if _, err := tx.PutTask(task); err != nil {
			return err
		}
		in, _, err := tx.Instance("i-1")
		if err != nil {
			return err
		}
		in.State = "awaiting_review"
		_, err = tx.PutInstance(in)
		return err
	}

	// onFirst failing: nothing is recorded, the report stays new.
	td := report("t-1", 7)
	boom := errors.New("boom")
	if _, err := st.RecordTaskDone(td, func(*Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing onFirst: %v", err)
	}
	if _, ok, _ := st.Delivery(td.Key()); ok {
		t.Error("a failed RecordTaskDone left a delivery behind")
	}
	if task, _ := st.GetTask("t-1"); task.LastDone != nil || task.State != "running" {
		t.Errorf("a failed RecordTaskDone changed the task: %+v", task)
	}

	clk.advance(time.Second)
	if _, err := st.RecordTaskDone(td, toReview); err != nil {
		t.Fatal(err)
	}
	task, err := st.GetTask("t-1")
	if err != nil {
		t.Fatal(err)
	}
	if task.State != "awaiting_review" || task.LastDone == nil || *task.LastDone != td || !task.UpdatedAt.Equal(clk.now()) {
		t.Errorf("task after a new report: %+v", task)
	}
	if in, _ := st.GetInstance("i-1"); in.State != "awaiting_review" {
		t.Errorf("instance after a new report: %+v", in)
	}

	// A duplicate runs no onFirst and changes nothing.
	ran := false
	if rc, err := st.RecordTaskDone(td, func(*Tx) error { ran = true; return nil }); err != nil || !rc.Duplicate || ran {
		t.Errorf("duplicate: %+v, %v, onFirst ran %v", rc, err, ran)
	}

	// A report naming the task under another instance is recorded (the
	// application hears of it) but does not touch the task.
	other := TaskDone{TaskID: "t-1", InstanceID: "i-9", Seq: 8, Status: "aborted", Summary: "lost"}
	if rc, err := st.RecordTaskDone(other, nil); err != nil || rc.Duplicate {
		t.Fatalf("other instance: %+v %v", rc, err)
	}
	if task, _ := st.GetTask("t-1"); *task.LastDone != td {
		t.Errorf("a report from another instance replaced LastDone: %+v", task.LastDone)
	}
	// A report for a task the store does not know is recorded too.
	if rc, err := st.RecordTaskDone(report("t-unknown", 1), nil); err != nil || rc.Duplicate {
		t.Errorf("unknown task: %+v %v", rc, err)
	}
}

func TestRecordTaskDoneRefusesBadReports(t *testing.T) {
	st := openT(t, t.TempDir())
	for name, td := range map[string]TaskDone{
		"no task id":     {InstanceID: "i", Seq: 1, Status: "settled"},
		"no instance id": {TaskID: "t", Seq: 1, Status: "settled"},
		"NaN seq":        {TaskID: "t", InstanceID: "i", Seq: math.NaN(), Status: "settled"},
		"infinite seq":   {TaskID: "t", InstanceID: "i", Seq: math.Inf(1), Status: "settled"},
		"no status":      {TaskID: "t", InstanceID: "i", Seq: 1},
	} {
		if _, err := st.RecordTaskDone(td, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := st.MarkNotified(DedupeKey{InstanceID: "i", TaskID: "t", Seq: 1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("marking an unknown key: %v, want ErrNotFound", err)
	}
	if pending, _ := st.PendingNotifications(); len(pending) != 0 {
		t.Errorf("pending after refusals: %v", pending)
	}
}

// notifyAll records and marks n reports task t-0 … t-(n-1), advancing the
// clock one second before each.
func notifyAll(t *testing.T, st *Store, clk *clock, from, n int) []DedupeKey {
	t.Helper()
	var keys []DedupeKey
	for i := from; i < from+n; i++ {
		clk.advance(time.Second)
		td := report("t-"+string(rune('A'+i)), float64(i))
		if _, err := st.RecordTaskDone(td, nil); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkNotified(td.Key()); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, td.Key())
	}
	return keys
}

func retained(t *testing.T, st *Store, keys []DedupeKey) []bool {
	t.Helper()
	out := make([]bool, len(keys))
	for i, k := range keys {
		_, ok, err := st.Delivery(k)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = ok
	}
	return out
}

func TestPruneKeepsAtMostMaxKeys(t *testing.T) {
	clk := newClock()
	st := openT(t, t.TempDir(), WithClock(clk.now), WithRetention(Retention{MaxKeys: 5, MaxAge: time.Hour}))
	// A pending report older than everything: never pruned.
	old := report("t-pending", 1)
	if _, err := st.RecordTaskDone(old, nil); err != nil {
		t.Fatal(err)
	}
	keys := notifyAll(t, st, clk, 0, 12)
	want := []bool{false, false, false, false, false, false, false, true, true, true, true, true}
	if d := cmp.Diff(want, retained(t, st, keys)); d != "" {
		t.Errorf("retained keys, oldest first (-want +got):\n%s", d)
	}
	pending, notified, err := st.DeliveryCounts()
	if err != nil || pending != 1 || notified != 5 {
		t.Errorf("counts: %d pending, %d notified, %v; want 1 and 5", pending, notified, err)
	}
	if _, ok, _ := st.Delivery(old.Key()); !ok {
		t.Error("a pending report was pruned")
	}
	// The documented limit: a replay of a pruned key is a new report.
	rc, err := st.RecordTaskDone(report("t-A", 0), nil)
	if err != nil || rc.Duplicate {
		t.Errorf("replay of a pruned key: %+v, %v", rc, err)
	}
	// A retained one is still a duplicate.
	if rc, err := st.RecordTaskDone(report("t-L", 11), nil); err != nil || !rc.Duplicate {
		t.Errorf("replay of a retained key: %+v, %v", rc, err)
	}
}

func TestPruneDropsKeysOlderThanMaxAge(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	ret := WithRetention(Retention{MaxKeys: 1000, MaxAge: time.Hour})
	st, err := Open(dir, WithClock(clk.now), ret)
	if err != nil {
		t.Fatal(err)
	}
	early := notifyAll(t, st, clk, 0, 3) // notified at +1 s, +2 s, +3 s
	clk.advance(time.Hour - 2*time.Second)
	// Now +1 h +1 s: the first is past MaxAge; MarkNotified prunes it.
	late := notifyAll(t, st, clk, 3, 1)
	if d := cmp.Diff([]bool{false, true, true, true}, retained(t, st, append(early, late...))); d != "" {
		t.Errorf("after MarkNotified (-want +got):\n%s", d)
	}
	// Prune on demand.
	clk.advance(time.Second)
	if n, err := st.Prune(); err != nil || n != 1 {
		t.Errorf("Prune: %d, %v; want 1", n, err)
	}
	st.Close()
	// Open prunes too.
	clk.advance(time.Hour)
	st = openT(t, dir, WithClock(clk.now), ret)
	if _, notified, _ := st.DeliveryCounts(); notified != 0 {
		t.Errorf("Open left %d expired keys", notified)
	}
}

func TestPruneBoundHoldsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 300 transactions")
	}
	clk := newClock()
	st := openT(t, t.TempDir(), WithClock(clk.now), WithRetention(Retention{MaxKeys: 50, MaxAge: 24 * time.Hour}))
	for i := range 300 {
		td := TaskDone{TaskID: "t", InstanceID: "i", Seq: float64(i), Status: "settled"}
		if _, err := st.RecordTaskDone(td, nil); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkNotified(td.Key()); err != nil {
			t.Fatal(err)
		}
		if _, notified, err := st.DeliveryCounts(); err != nil || notified > 50 {
			t.Fatalf("after %d reports: %d keys kept, bound 50 (%v)", i+1, notified, err)
		}
	}
	var kept int
	if err := st.View(func(tx *Tx) error {
		kept = tx.tx.Bucket(bucketDeliveries).Stats().KeyN
		return nil
	}); err != nil || kept != 50 {
		t.Errorf("%d delivery records on disk, want 50 (%v)", kept, err)
	}
}
