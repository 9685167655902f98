package trust

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/bbolt"

	"example.com/pifleet/transport/identity"
)

var t0 = time.Date(2026, 3, 1, 18, 22, 5, 0, time.UTC)

// fixedClock returns a clock stuck at t0.
func fixedClock() time.Time { return t0 }

func dbPath(t *testing.T) string { return filepath.Join(t.TempDir(), "state", "server.db") }

func openStore(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, append([]Option{WithClock(fixedClock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSetGetListForget(t *testing.T) {
	s := openStore(t, dbPath(t))

	if _, ok, err := s.Get("buildbox"); ok || err != nil {
		t.Fatalf("Get on empty store = %v, %v", ok, err)
	}
	for machine, p := range map[string]Policy{"buildbox": Steer, "ci-runner-3": Deny, "ana-mba": Allow} {
		if _, err := s.Set(machine, p); err != nil {
			t.Fatal(err)
		}
	}
	d, ok, err := s.Get("buildbox")
	if err != nil || !ok || d.Policy != Steer || !d.DecidedAt.Equal(t0) {
		t.Errorf("Get(buildbox) = %+v, %v, %v", d, ok, err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	want := []Decision{
		{Machine: "ana-mba", Policy: Allow, DecidedAt: t0},
		{Machine: "buildbox", Policy: Steer, DecidedAt: t0},
		{Machine: "ci-runner-3", Policy: Deny, DecidedAt: t0},
	}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	if existed, err := s.Forget("buildbox"); !existed || err != nil {
		t.Errorf("Forget(buildbox) = %v, %v", existed, err)
	}
	if existed, err := s.Forget("buildbox"); existed || err != nil {
		t.Errorf("second Forget(buildbox) = %v, %v", existed, err)
	}
	if _, ok, _ := s.Get("buildbox"); ok {
		t.Error("forgotten machine still stored")
	}
}

// The operator's `trust set` is for the machine: the user and key of the
// next connection are recorded with it, without a question.
func TestSetRecordsTheNextContact(t *testing.T) {
	s := openStore(t, dbPath(t), WithPrompter(Fixed(Allow)))
	if _, err := s.DecideKey(t.Context(), identity.Identity{Machine: "buildbox", User: "ana@github"}, "ed25519:old"); err != nil {
		t.Fatal(err)
	}
	d, err := s.Set("buildbox", Steer)
	if err != nil || d.User != "" || d.Key != "" || d.Policy != Steer {
		t.Errorf("Set = %+v, %v; want user and key cleared", d, err)
	}
	s.prompter = mustNotAsk(t)
	if p, err := s.DecideKey(t.Context(), identity.Identity{Machine: "buildbox", User: "eve@example"}, "ed25519:new"); p != Steer || err != nil {
		t.Fatalf("after trust set: %q, %v", p, err)
	}
	if d, _, _ := s.Get("buildbox"); d.User != "eve@example" || d.Key != "ed25519:new" || d.Policy != Steer {
		t.Errorf("recorded %+v", d)
	}
}

func TestStoreRejectsBadInput(t *testing.T) {
	s := openStore(t, dbPath(t))
	if _, err := s.Set("", Allow); !errors.Is(err, ErrBadMachine) {
		t.Errorf("empty machine: %v", err)
	}
	if _, err := s.Set(strings.Repeat("a", MaxMachineLen+1), Allow); !errors.Is(err, ErrBadMachine) {
		t.Errorf("long machine: %v", err)
	}
	if _, err := s.Set("buildbox", "root"); !errors.Is(err, ErrBadPolicy) {
		t.Errorf("bad policy: %v", err)
	}
	if _, _, err := s.Get(""); !errors.Is(err, ErrBadMachine) {
		t.Errorf("Get empty: %v", err)
	}
	if _, err := s.Forget(""); !errors.Is(err, ErrBadMachine) {
		t.Errorf("Forget empty: %v", err)
	}
	if p, err := s.Decide(t.Context(), identity.Identity{User: "ana@github"}); p != Deny || !errors.Is(err, ErrBadMachine) {
		t.Errorf("Decide without machine = %q, %v", p, err)
	}
	if list, err := s.List(); len(list) != 0 || err != nil {
		t.Errorf("rejected input was stored: %v, %v", list, err)
	}
}

func TestDecisionsSurviveReopen(t *testing.T) {
	path := dbPath(t)
	s, err := Open(path, WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set("buildbox", Steer); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path)
	d, ok, err := s.Get("buildbox")
	if err != nil || !ok || d.Policy != Steer || !d.DecidedAt.Equal(t0) {
		t.Errorf("after reopen: %+v, %v, %v", d, ok, err)
	}
}

// The server keeps several buckets in one file; the store shares it.
func TestNewSharesADatabase(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "server.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("tasks"))
		if err != nil {
			return err
		}
		return b.Put([]byte("t-1"), []byte("open"))
	})
	if err != nil {
		t.Fatal(err)
	}

	s, err := New(db, "trust", WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set("buildbox", Allow); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Close left the shared database open and the other bucket alone.
	err = db.View(func(tx *bbolt.Tx) error {
		if got := string(tx.Bucket([]byte("tasks")).Get([]byte("t-1"))); got != "open" {
			return fmt.Errorf("tasks bucket: %q", got)
		}
		if tx.Bucket([]byte("trust")).Get([]byte("buildbox")) == nil {
			return errors.New("decision not in the trust bucket")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(db, ""); err == nil {
		t.Error("New accepted an empty bucket name")
	}
}

func TestCorruptRecordIsReportedNotTrusted(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "server.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	asked := 0
	s, err := New(db, "trust", WithPrompter(PrompterFunc(func(context.Context, identity.Identity) (Policy, error) {
		asked++
		return Steer, nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	records := map[string]string{
		"garbage":   `{"machine":`,
		"renamed":   `{"machine":"other","policy":"allow"}`,
		"badpolicy": `{"machine":"badpolicy","policy":"root"}`,
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for k, v := range records {
			if err := tx.Bucket([]byte("trust")).Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for machine := range records {
		if _, _, err := s.Get(machine); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), machine) {
			t.Errorf("Get(%s) err = %v, want ErrCorrupt naming it", machine, err)
		}
		// A damaged record is neither trusted nor silently re-asked.
		if p, err := s.Decide(t.Context(), identity.Identity{Machine: machine, User: "u"}); p != Deny || !errors.Is(err, ErrCorrupt) {
			t.Errorf("Decide(%s) = %q, %v", machine, p, err)
		}
	}
	if asked != 0 {
		t.Errorf("prompter asked %d times about damaged records", asked)
	}
	if _, err := s.List(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("List err = %v", err)
	}
	// The operator repairs a record by setting it.
	if _, err := s.Set("garbage", Allow); err != nil {
		t.Fatal(err)
	}
	if d, ok, err := s.Get("garbage"); !ok || err != nil || d.Policy != Allow {
		t.Errorf("after repair: %+v, %v, %v", d, ok, err)
	}
}

func TestOpenFailsWhileAnotherProcessHoldsTheFile(t *testing.T) {
	path := dbPath(t)
	openStore(t, path)
	// bbolt locks the file per open; a second open in this process is
	// refused exactly as another process's would be.
	if _, err := Open(path); err == nil {
		t.Fatal("second Open of a held file succeeded")
	}
}

// TestKill9LosesNothingAcknowledged runs a real writer process that makes
// first-contact decisions as fast as it can, printing each one once Decide
// has returned, and kills it with SIGKILL midway. Every acknowledged
// decision must be in the file afterwards, and the file must open.
func TestKill9LosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	path := dbPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDecisionWriter$")
	cmd.Env = append(os.Environ(), "PIFLEET_TRUST_WRITER_DB="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]Policy{}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		machine, policy, ok := strings.Cut(strings.TrimPrefix(lines.Text(), "ack "), " ")
		if !ok {
			continue // go test's own output
		}
		acked[machine] = Policy(policy)
		if len(acked) == 150 {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The pipe may still have held acknowledgements printed before the
	// kill; the loop above read them all (up to EOF).
	if err := cmd.Wait(); err == nil {
		t.Fatal("the writer finished before it was killed; raise its bound")
	}
	if len(acked) < 150 {
		t.Fatalf("only %d acknowledgements before the writer died", len(acked))
	}

	s := openStore(t, path)
	list, err := s.List()
	if err != nil {
		t.Fatalf("after kill -9: %v", err)
	}
	stored := map[string]Policy{}
	for _, d := range list {
		stored[d.Machine] = d.Policy
	}
	for machine, p := range acked {
		if stored[machine] != p {
			t.Errorf("acknowledged %s=%s, stored %q", machine, p, stored[machine])
		}
	}
	t.Logf("%d acknowledged, %d stored after kill -9", len(acked), len(stored))
}

// TestHelperDecisionWriter is the child of TestKill9LosesNothingAcknowledged.
func TestHelperDecisionWriter(t *testing.T) {
	path := os.Getenv("PIFLEET_TRUST_WRITER_DB")
	if path == "" {
		t.Skip("helper process for TestKill9LosesNothingAcknowledged")
	}
	policies := []Policy{Allow, Steer, Deny}
	i := 0
	s, err := Open(path, WithPrompter(PrompterFunc(func(context.Context, identity.Identity) (Policy, error) {
		return policies[i%3], nil
	})))
	if err != nil {
		t.Fatal(err)
	}
	for i = range 100_000 { // bounded; the parent kills us long before
		machine := fmt.Sprintf("m%06d", i)
		p, err := s.Decide(t.Context(), identity.Identity{Machine: machine, User: "ana@github"})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("ack %s %s\n", machine, p)
	}
}
