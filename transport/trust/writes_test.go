package trust

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"go.etcd.io/bbolt"

	"example.com/pifleet/transport/identity"
)

// Many machines seen for the first time at once (a server meeting its
// fleet) are each decided, stored and asked once, and their writes share
// transactions.
func TestConcurrentFirstContactsAreAllStored(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "trust.db"), WithPrompter(Fixed(Steer)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			p, err := s.DecideKey(t.Context(), identity.Identity{Machine: fmt.Sprintf("box-%03d", i), User: "u"}, "ed25519:k"+strconv.Itoa(i))
			if err == nil && p != Steer {
				err = fmt.Errorf("policy %q", p)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("box-%03d: %v", i, err)
		}
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("%d decisions stored, want %d", len(list), n)
	}
	for i, d := range list {
		if d.Machine != fmt.Sprintf("box-%03d", i) || d.Key != "ed25519:k"+strconv.Itoa(i) || d.Policy != Steer {
			t.Errorf("stored %+v", d)
		}
	}
}

// Every change goes through the writer WithWrites sets, which may run it
// more than once: here each change first runs in a transaction that is
// rolled back (as when a write queue's group fails), then in one that
// commits. What is stored and answered is as if it ran once.
func TestWritesGoThroughWithWritesAndMayRunTwice(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "server.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	errRollback := fmt.Errorf("rolled back")
	writes := 0
	twice := func(fn func(*bbolt.Tx) error) error {
		writes++
		if err := db.Update(func(tx *bbolt.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errRollback
		}); err != errRollback {
			return err
		}
		return db.Update(fn)
	}
	prompter := &countingPrompter{p: Steer}
	s, err := New(db, "trust", WithPrompter(prompter), WithWrites(twice))
	if err != nil {
		t.Fatal(err)
	}
	ci := identity.Identity{Machine: "ci-runner", User: "tagged"}
	if p, err := s.DecideKey(t.Context(), ci, "ed25519:ci"); p != Steer || err != nil {
		t.Fatalf("first contact: %q, %v", p, err)
	}
	if writes != 1 {
		t.Fatalf("first contact: %d writes through WithWrites, want 1", writes)
	}
	if _, err := s.Set("buildbox", Allow); err != nil {
		t.Fatal(err)
	}
	// Known without a key: the key is recorded with the stored decision.
	if p, err := s.DecideKey(t.Context(), identity.Identity{Machine: "buildbox", User: "ana"}, "ed25519:bb"); p != Allow || err != nil {
		t.Fatalf("known machine: %q, %v", p, err)
	}
	if ok, err := s.Forget("ci-runner"); !ok || err != nil {
		t.Fatalf("forget: %v, %v", ok, err)
	}
	if writes != 4 {
		t.Errorf("%d writes through WithWrites, want 4 (first contact, set, key, forget)", writes)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Machine != "buildbox" || list[0].Key != "ed25519:bb" || list[0].User != "ana" || list[0].Policy != Allow {
		t.Errorf("stored %+v", list)
	}
	if prompter.count() != 1 {
		t.Errorf("asked %d times, want 1", prompter.count())
	}
}
