package agentstore

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jpillora/backoff"
	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/transport"
)

func TestPutAssignsSeq(t *testing.T) {
	c := newClock()
	s, _ := open(t, c)
	ms := Seq(c.Now().UnixMilli())

	in := done("i1", "t1")
	in.Seq = 42 // ignored: the store assigns seqs
	e1, err := s.Put(in, "conn-a")
	if err != nil {
		t.Fatal(err)
	}
	e2 := mustPut(t, s, "i1", "t2") // same millisecond
	c.Add(time.Second)
	e3 := mustPut(t, s, "i1", "t3")

	if got, want := []Seq{e1.Seq, e2.Seq, e3.Seq}, []Seq{ms, ms + 1, ms + 1000}; !cmp.Equal(got, want) {
		t.Errorf("seqs = %v, want %v (max(last+1, now in ms))", got, want)
	}
	if in.Seq != 42 {
		t.Errorf("Put modified the caller's frame: seq %v", in.Seq)
	}
	if e1.Frame.Seq != e1.Seq.Float() || e1.Owner != "conn-a" || !e1.CreatedAt.Equal(c.Now().Add(-time.Second)) {
		t.Errorf("entry = %+v", e1)
	}
}

// The seq of a restarted agent continues above every earlier one even
// when its clock is now hours behind.
func TestSeqNeverReusedAfterRestartWithClockBackwards(t *testing.T) {
	c := newClock()
	dir := t.TempDir()
	s := openAt(t, dir, c)
	var before []Seq
	for i := range 5 {
		before = append(before, mustPut(t, s, "i1", "t"+string(rune('a'+i))).Seq)
	}
	s.Close()

	c.Add(-3 * time.Hour)
	s = openAt(t, dir, c)
	defer s.Close()
	after := mustPut(t, s, "i1", "late").Seq
	if after != before[len(before)-1]+1 {
		t.Errorf("seq after restart with the clock 3 h back = %d, want %d", after, before[len(before)-1]+1)
	}
	// Acking everything does not free any seq either.
	for _, e := range pending(t, s) {
		if _, err := s.Ack(e.Frame.TaskID, e.Seq.Float()); err != nil {
			t.Fatal(err)
		}
	}
	if again := mustPut(t, s, "i1", "again").Seq; again != after+1 {
		t.Errorf("seq after an emptied outbox = %d, want %d", again, after+1)
	}
}

func TestPendingPersistsAcrossReopen(t *testing.T) {
	c := newClock()
	dir := t.TempDir()
	s := openAt(t, dir, c)
	var want []Entry
	for _, task := range []string{"t1", "t2", "t3", "t4"} {
		want = append(want, mustPut(t, s, "i1", task))
		c.Add(-time.Minute) // the clock runs backwards: order is by seq, not time
	}
	if ok, err := s.Ack("t2", want[1].Seq.Float()); !ok || err != nil {
		t.Fatalf("ack t2 = %v, %v", ok, err)
	}
	want = append(want[:1], want[2:]...)
	s.Close()

	s = openAt(t, dir, c)
	defer s.Close()
	got := pending(t, s)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pending after reopen (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Errorf("pending not in seq order: %v", seqs(got))
		}
	}
}

func TestAckIdempotent(t *testing.T) {
	s, _ := open(t, newClock())
	e := mustPut(t, s, "i1", "t1")
	other := mustPut(t, s, "i1", "t2")

	cases := []struct {
		name   string
		taskID string
		seq    float64
		want   bool
	}{
		{"another task's seq", "t2", e.Seq.Float(), false},
		{"not an integer", "t1", e.Seq.Float() + 0.5, false},
		{"negative", "t1", -1, false},
		{"beyond MaxSeq", "t1", math.Ldexp(1, 60), false},
		{"unknown seq", "t1", 12345, false},
		{"the entry", "t1", e.Seq.Float(), true},
		{"again", "t1", e.Seq.Float(), false},
	}
	for _, c := range cases {
		if got, err := s.Ack(c.taskID, c.seq); got != c.want || err != nil {
			t.Errorf("%s: Ack(%s, %v) = %v, %v; want %v", c.name, c.taskID, c.seq, got, err, c.want)
		}
	}
	if got := seqs(pending(t, s)); !cmp.Equal(got, []Seq{other.Seq}) {
		t.Errorf("pending = %v, want only %d", got, other.Seq)
	}
}

func TestPutInvalid(t *testing.T) {
	s, _ := open(t, newClock())
	bad := func(mut func(*transport.TaskDoneFrame)) *transport.TaskDoneFrame {
		f := done("i1", "t1")
		mut(f)
		return f
	}
	cases := map[string]*transport.TaskDoneFrame{
		"nil":            nil,
		"no taskId":      bad(func(f *transport.TaskDoneFrame) { f.TaskID = "" }),
		"no instanceId":  bad(func(f *transport.TaskDoneFrame) { f.InstanceID = "" }),
		"unknown status": bad(func(f *transport.TaskDoneFrame) { f.Status = "finished" }),
		"over a frame": bad(func(f *transport.TaskDoneFrame) {
			f.LastAssistantMessage = strings.Repeat("x", transport.MaxFrameBytes)
		}),
	}
	for name, f := range cases {
		_, err := s.Put(f, "")
		var ie *InvalidError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &ie) {
			t.Errorf("%s: err = %v, want an *InvalidError", name, err)
		}
	}
	if n := len(pending(t, s)); n != 0 || lastSeq(t, s) != 0 {
		t.Errorf("refused puts left %d entries and last seq %d", n, lastSeq(t, s))
	}
}

func TestRetrySchedule(t *testing.T) {
	c := newClock()
	s, _ := open(t, c, WithRetryPolicy(steps{time.Second, 5 * time.Second}))
	a := mustPut(t, s, "i1", "a")
	c.Add(time.Millisecond)
	b := mustPut(t, s, "i1", "b")

	due := func() []Seq {
		t.Helper()
		es, err := s.Due()
		if err != nil {
			t.Fatal(err)
		}
		return seqs(es)
	}
	if got := due(); !cmp.Equal(got, []Seq{a.Seq, b.Seq}) {
		t.Fatalf("due before any send = %v, want both", got)
	}
	if err := s.MarkSent(a.Seq, b.Seq, 999); err != nil { // 999: unknown, ignored
		t.Fatal(err)
	}
	if got := due(); len(got) != 0 {
		t.Errorf("due right after sending = %v, want none", got)
	}
	next, ok, err := s.NextDue()
	if err != nil || !ok || !next.Equal(c.Now().Add(time.Second)) {
		t.Errorf("NextDue = %v, %v, %v; want now+1s", next, ok, err)
	}
	c.Add(time.Second - time.Millisecond)
	if got := due(); len(got) != 0 {
		t.Errorf("due 1 ms early = %v", got)
	}
	c.Add(time.Millisecond)
	if got := due(); !cmp.Equal(got, []Seq{a.Seq, b.Seq}) {
		t.Errorf("due after 1 s = %v, want both", got)
	}
	if err := s.MarkSent(a.Seq); err != nil {
		t.Fatal(err)
	}
	es := pending(t, s)
	if es[0].Attempts != 2 || es[1].Attempts != 1 || es[0].PreferOwner() {
		t.Errorf("attempts = %d, %d; want 2, 1", es[0].Attempts, es[1].Attempts)
	}
	if want := c.Now().Add(5 * time.Second); !es[0].NextAttemptAt.Equal(want) || !es[0].LastAttemptAt.Equal(c.Now()) {
		t.Errorf("second retry of a at %v, want %v", es[0].NextAttemptAt, want)
	}
	if got := due(); !cmp.Equal(got, []Seq{b.Seq}) {
		t.Errorf("due = %v, want only b", got)
	}
}

// With jpillora/backoff itself (no jitter) the delays double up to the cap.
func TestRetryWithBackoff(t *testing.T) {
	c := newClock()
	s, _ := open(t, c, WithRetryPolicy(&backoff.Backoff{Min: time.Second, Max: 4 * time.Second, Factor: 2}))
	e := mustPut(t, s, "i1", "t1")
	var got []time.Duration
	for range 5 {
		if err := s.MarkSent(e.Seq); err != nil {
			t.Fatal(err)
		}
		next, _, _ := s.NextDue()
		got = append(got, next.Sub(c.Now()))
		c.Add(next.Sub(c.Now()))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
	if !cmp.Equal(got, want) {
		t.Errorf("retry delays = %v, want %v", got, want)
	}
	if d := DefaultRetryPolicy().ForAttempt(10); d != time.Minute {
		t.Errorf("default policy caps at %v, want 1m", d)
	}
}

func TestOwnerHint(t *testing.T) {
	s, _ := open(t, newClock())
	e, err := s.Put(done("i1", "t1"), "conn-a")
	if err != nil {
		t.Fatal(err)
	}
	if !e.PreferOwner() {
		t.Error("PreferOwner = false before the first attempt")
	}
	if err := s.MarkSent(e.Seq); err != nil {
		t.Fatal(err)
	}
	if got := pending(t, s)[0]; got.PreferOwner() || got.Owner != "conn-a" {
		t.Errorf("after one attempt: PreferOwner %v owner %q; want false, the owner kept", got.PreferOwner(), got.Owner)
	}
}

// Put closes the instance's open task in its own transaction; another
// open task is left alone.
func TestPutClosesOpenTask(t *testing.T) {
	s, _ := open(t, newClock())
	for _, in := range []Instance{
		{InstanceID: "i1", Cwd: "/w", TaskID: "t1", TaskOwner: "conn-a"},
		{InstanceID: "i2", Cwd: "/w", TaskID: "newer"},
	} {
		if _, err := s.PutInstance(in); err != nil {
			t.Fatal(err)
		}
	}
	mustPut(t, s, "i1", "t1")
	mustPut(t, s, "i2", "older")
	mustPut(t, s, "gone", "t9") // no record: fine
	if got, _ := s.Instance("i1"); got.TaskID != "" || got.TaskOwner != "" {
		t.Errorf("i1 still has open task %q (owner %q)", got.TaskID, got.TaskOwner)
	}
	if got, _ := s.Instance("i2"); got.TaskID != "newer" {
		t.Errorf("i2 open task = %q, want newer kept", got.TaskID)
	}
}

func TestCorruptEntrySkipped(t *testing.T) {
	s, _ := open(t, newClock())
	good := mustPut(t, s, "i1", "t1")
	bad := good.Seq + 5
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOutbox).Put(bad.key(), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if got := seqs(pending(t, s)); !cmp.Equal(got, []Seq{good.Seq}) {
		t.Errorf("pending = %v, want the good entry only", got)
	}
	if _, err := s.Ack("t1", bad.Float()); !errors.Is(err, ErrCorrupt) {
		t.Errorf("ack of a corrupt entry: err = %v, want ErrCorrupt", err)
	}
}

func TestSeqOf(t *testing.T) {
	for f, want := range map[float64]bool{1: true, 1.5: false, 0: false, -3: false, float64(MaxSeq): true, float64(MaxSeq) * 2: false, math.NaN(): false, math.Inf(1): false} {
		if _, ok := SeqOf(f); ok != want {
			t.Errorf("SeqOf(%v) ok = %v, want %v", f, ok, want)
		}
	}
}

// Concurrent puts get distinct seqs, and Pending lists them all in order.
func TestConcurrentPuts(t *testing.T) {
	s, _ := open(t, newClock())
	var wg sync.WaitGroup
	got := make(chan Seq, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 8 {
				e, err := s.Put(done("i1", string(rune('a'+g))+string(rune('a'+i))), "")
				if err != nil {
					t.Error(err)
					return
				}
				got <- e.Seq
			}
		})
	}
	wg.Wait()
	close(got)
	seen := map[Seq]bool{}
	for q := range got {
		if seen[q] {
			t.Errorf("seq %d assigned twice", q)
		}
		seen[q] = true
	}
	if n := len(pending(t, s)); n != 64 || len(seen) != 64 {
		t.Errorf("%d pending, %d distinct seqs; want 64", n, len(seen))
	}
}

func BenchmarkPutAck(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	f := done("i1", "t1")
	for b.Loop() {
		e, err := s.Put(f, "")
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := s.Ack("t1", e.Seq.Float()); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
