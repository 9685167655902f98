package serverstore

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/internal/boltfile"
	"example.com/pifleet/transport/trust"
)

func TestRecordsPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	st, err := Open(dir, WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	task := Task{
		TaskID: "t-1", InstanceID: "i-1", Machine: "buildbox", Prompt: "fix the tests",
		TraceID: "tr-1", State: "running", MaxRejects: 3,
		Feedback: []Feedback{{At: clk.now(), Text: "also lint", By: "application", Delivered: true}},
	}
	in := Instance{
		InstanceID: "i-1", Machine: "buildbox", Cwd: "/src/api", Bundle: "default", BundleHash: "abc",
		Model: &ModelRef{Provider: "p", ID: "m"}, State: "idle", SessionPath: "/s.jsonl", LastSeenEventSeq: 42,
	}
	agent := Agent{Name: "buildbox", Addresses: []string{"100.64.0.7:9788", "buildbox:9788"}}
	projection := []byte(`{"sessions":[{"id":"s1"}]}`)

	storedTask, err := st.PutTask(task)
	if err != nil {
		t.Fatal(err)
	}
	storedIn, err := st.PutInstance(in)
	if err != nil {
		t.Fatal(err)
	}
	storedAgent, err := st.PutAgent(agent)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutProjection("buildbox", projection); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openT(t, dir, WithClock(clk.now))
	gotTask, err := st.GetTask("t-1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(storedTask, gotTask); d != "" {
		t.Errorf("task after reopen (-put +got):\n%s", d)
	}
	gotIn, err := st.GetInstance("i-1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(storedIn, gotIn); d != "" {
		t.Errorf("instance after reopen (-put +got):\n%s", d)
	}
	agents, err := st.ListAgents()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Agent{storedAgent}, agents); d != "" {
		t.Errorf("agents after reopen (-put +got):\n%s", d)
	}
	gotProjection, err := st.GetProjection("buildbox")
	if err != nil || string(gotProjection) != string(projection) {
		t.Errorf("projection after reopen: %q, %v", gotProjection, err)
	}

	for name, del := range map[string]func() (bool, error){
		"task":     func() (bool, error) { return st.DeleteTask("t-1") },
		"instance": func() (bool, error) { return st.DeleteInstance("i-1") },
		"agent":    func() (bool, error) { return st.DeleteAgent("buildbox") },
	} {
		if existed, err := del(); err != nil || !existed {
			t.Errorf("delete %s: existed %v, %v", name, existed, err)
		}
		if existed, err := del(); err != nil || existed {
			t.Errorf("second delete %s: existed %v, %v", name, existed, err)
		}
	}
	if _, err := st.GetTask("t-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted task: %v, want ErrNotFound", err)
	}
	if _, err := st.GetInstance("i-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted instance: %v, want ErrNotFound", err)
	}
	if _, err := st.GetProjection("elsewhere"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing projection: %v, want ErrNotFound", err)
	}
}

func TestPutStampsTimesAndKeepsCreatedAt(t *testing.T) {
	clk := newClock()
	st := openT(t, t.TempDir(), WithClock(clk.now))
	created := clk.now()
	first, err := st.PutInstance(Instance{InstanceID: "i-1", Machine: "m", State: "requested"})
	if err != nil {
		t.Fatal(err)
	}
	if !first.CreatedAt.Equal(created) || !first.UpdatedAt.Equal(created) {
		t.Errorf("first put: created %v updated %v, want both %v", first.CreatedAt, first.UpdatedAt, created)
	}
	clk.advance(time.Minute)
	second, err := st.PutInstance(Instance{InstanceID: "i-1", Machine: "m", State: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	if !second.CreatedAt.Equal(created) || !second.UpdatedAt.Equal(created.Add(time.Minute)) {
		t.Errorf("second put: created %v updated %v", second.CreatedAt, second.UpdatedAt)
	}
	list, err := st.ListInstances()
	if err != nil || len(list) != 1 || list[0].State != "idle" {
		t.Errorf("list: %+v, %v", list, err)
	}
}

func TestPutTaskBoundsTexts(t *testing.T) {
	st := openT(t, t.TempDir())
	long := strings.Repeat("é", MaxTextBytes) // 2 bytes a rune: the cut lands mid-rune
	stored, err := st.PutTask(Task{
		TaskID: "t-1", InstanceID: "i-1", State: "running", Prompt: long,
		Feedback: []Feedback{{Text: long, By: "human"}, {Text: "short", By: "application"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"prompt": stored.Prompt, "feedback": stored.Feedback[0].Text} {
		if len(s) > MaxTextBytes || len(s) < MaxTextBytes-utf8.UTFMax || !utf8.ValidString(s) {
			t.Errorf("%s bounded to %d bytes (valid UTF-8 %v)", name, len(s), utf8.ValidString(s))
		}
	}
	if !stored.PromptTruncated || !stored.Feedback[0].Truncated || stored.Feedback[1].Truncated {
		t.Errorf("truncation flags: prompt %v, feedback %v %v", stored.PromptTruncated, stored.Feedback[0].Truncated, stored.Feedback[1].Truncated)
	}
}

func TestInvalidInputIsRefusedAndNamed(t *testing.T) {
	st := openT(t, t.TempDir())
	long := strings.Repeat("x", MaxIDBytes+1)
	cases := map[string]struct {
		field string
		do    func() error
	}{
		"task without id": {"taskId", func() error { _, err := st.PutTask(Task{InstanceID: "i", State: "running"}); return err }},
		"task without instance": {"instanceId", func() error {
			_, err := st.PutTask(Task{TaskID: "t", State: "running"})
			return err
		}},
		"task without state": {"state", func() error { _, err := st.PutTask(Task{TaskID: "t", InstanceID: "i"}); return err }},
		"negative rejects": {"rejects", func() error {
			_, err := st.PutTask(Task{TaskID: "t", InstanceID: "i", State: "running", Rejects: -1})
			return err
		}},
		"long instance id": {"instanceId", func() error {
			_, err := st.PutInstance(Instance{InstanceID: long, Machine: "m", State: "idle"})
			return err
		}},
		"instance without machine": {"machine", func() error {
			_, err := st.PutInstance(Instance{InstanceID: "i", State: "idle"})
			return err
		}},
		"agent without address": {"addresses", func() error { _, err := st.PutAgent(Agent{Name: "a"}); return err }},
		"agent with empty address": {"addresses[1]", func() error {
			_, err := st.PutAgent(Agent{Name: "a", Addresses: []string{"x:1", ""}})
			return err
		}},
		"projection not JSON":  {"projection", func() error { return st.PutProjection("m", []byte("{oops")) }},
		"lookup with empty id": {"taskId", func() error { _, err := st.GetTask(""); return err }},
	}
	for name, c := range cases {
		err := c.do()
		var ie *InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || ie.Field != c.field {
			t.Errorf("%s: %v, want an InvalidError for field %s", name, err, c.field)
		}
	}
	tasks, _ := st.ListTasks()
	ins, _ := st.ListInstances()
	if len(tasks)+len(ins) != 0 {
		t.Errorf("refused input was stored: %v %v", tasks, ins)
	}
}

func TestUpdateIsOneTransaction(t *testing.T) {
	st := openT(t, t.TempDir())
	boom := errors.New("boom")
	err := st.Update(func(tx *Tx) error {
		if _, err := tx.PutTask(Task{TaskID: "t-1", InstanceID: "i-1", State: "verifying"}); err != nil {
			return err
		}
		if _, err := tx.PutInstance(Instance{InstanceID: "i-1", Machine: "m", State: "verifying"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v", err)
	}
	if _, err := st.GetTask("t-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("task of a failed transaction: %v", err)
	}
	if _, err := st.GetInstance("i-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("instance of a failed transaction: %v", err)
	}
	err = st.View(func(tx *Tx) error {
		_, err := tx.PutTask(Task{TaskID: "t-1", InstanceID: "i-1", State: "running"})
		return err
	})
	if err == nil {
		t.Error("a write through View succeeded")
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	openT(t, dir)
	_, err := Open(dir, WithLockTimeout(50*time.Millisecond))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
}

func TestOpenRefusesOtherLayoutsAndBadRetention(t *testing.T) {
	dir := t.TempDir()
	st := openT(t, dir)
	if err := st.DB().Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(boltfile.LayoutKey, []byte("9"))
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, err := Open(dir)
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Got != "9" || ve.Want != layoutVersion {
		t.Errorf("Open of a layout 9 file: %v", err)
	}
	for _, r := range []Retention{{MaxKeys: 0, MaxAge: time.Hour}, {MaxKeys: 1, MaxAge: 0}} {
		if _, err := Open(t.TempDir(), WithRetention(r)); !errors.Is(err, ErrInvalid) {
			t.Errorf("retention %+v: %v, want ErrInvalid", r, err)
		}
	}
}

func TestCorruptRecordsAreReportedNotSkipped(t *testing.T) {
	st := openT(t, t.TempDir())
	if _, err := st.PutTask(Task{TaskID: "t-ok", InstanceID: "i", State: "running"}); err != nil {
		t.Fatal(err)
	}
	if err := st.DB().Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketTasks).Put([]byte("t-garbage"), []byte("{not json")); err != nil {
			return err
		}
		return tx.Bucket(bucketInstances).Put([]byte("i-1"), []byte(`{"instanceId":"i-2","machine":"m","state":"idle"}`))
	}); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := st.GetTask("t-garbage"); !errors.As(err, &ce) || ce.Key != "t-garbage" || !errors.Is(err, ErrCorrupt) {
		t.Errorf("garbage task: %v", err)
	}
	if _, err := st.ListTasks(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("listing with a garbage task: %v, want ErrCorrupt", err)
	}
	if _, err := st.GetInstance("i-1"); !errors.As(err, &ce) || !strings.Contains(err.Error(), `"i-2"`) {
		t.Errorf("instance stored under another id: %v", err)
	}
}

// TestTrustSharesTheFile keeps trust decisions in the server's file and
// finds them again after a reopen, next to the store's own records.
func TestTrustSharesTheFile(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trust.New(st.DB(), TrustBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Set("buildbox", trust.Steer); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutAgent(Agent{Name: "buildbox", Addresses: []string{"buildbox:9788"}}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil { // leaves the shared database open
		t.Fatal(err)
	}
	if _, err := st.ListAgents(); err != nil {
		t.Fatalf("the store after trust.Close: %v", err)
	}
	st.Close()

	st = openT(t, dir)
	tr, err = trust.New(st.DB(), TrustBucket)
	if err != nil {
		t.Fatal(err)
	}
	d, ok, err := tr.Get("buildbox")
	if err != nil || !ok || d.Policy != trust.Steer {
		t.Errorf("trust decision after reopen: %+v %v %v", d, ok, err)
	}
	if agents, err := st.ListAgents(); err != nil || len(agents) != 1 {
		t.Errorf("agents after reopen: %v %v", agents, err)
	}
}
