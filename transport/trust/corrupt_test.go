package trust

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"example.com/pifleet/internal/boltfile/boltfiletest"
)

// populatedTrustFile writes a trust file holding decisions into dir and
// closes it.
func populatedTrustFile(t *testing.T, dir string) {
	t.Helper()
	s, err := Open(filepath.Join(dir, "trust.db"), WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range []string{"alpha", "bravo", "charlie", "delta", strings.Repeat("e", 200)} {
		if _, err := s.Set(m, Steer); err != nil {
			t.Fatal(err)
		}
	}
}

// The standalone trust file (Open) is refused, never opened empty, when it
// is empty, truncated or damaged: an empty start would forget every
// decision, and a machine denied before would be asked about again. The
// error names the file and what to do; WithResetCorrupt moves it aside
// and starts afresh (#16).
func TestOpenRefusesACorruptTrustFile(t *testing.T) {
	boltfiletest.Refuses(t, boltfiletest.Store{
		File:     "trust.db",
		Populate: populatedTrustFile,
		Open: func(dir string, onReset func(string, error)) (io.Closer, error) {
			path := filepath.Join(dir, "trust.db")
			if onReset != nil {
				return Open(path, WithResetCorrupt(onReset))
			}
			return Open(path)
		},
		Empty: func(t *testing.T, opened io.Closer) bool {
			list, err := opened.(*Store).List()
			return err == nil && len(list) == 0
		},
	}, boltfiletest.Corruptions(nil, [][]byte{[]byte(DefaultBucket)}, boltfiletest.Record{Bucket: []byte(DefaultBucket), Key: []byte("bravo")}))
}

// The message of an empty trust file says which file, and how to start
// afresh from the Go package (not the daemons' flag).
func TestOpenOfAnEmptyTrustFileSaysWhatToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trust.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	var ce *CorruptFileError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptFile) || ce.Path != path {
		t.Fatalf("Open of an empty file: %v, want a *CorruptFileError naming %s", err, path)
	}
	for _, want := range []string{path, "WithResetCorrupt", "backup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Errorf("the refused file was changed: %d bytes", len(b))
	}
}

// A trust file written before Open checked files (a bbolt file with the
// trust bucket, as New leaves it) still opens, decisions and all.
func TestOpenReadsATrustFileNewWrote(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trust.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db, DefaultBucket, WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set("alpha", Deny); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path)
	if d, ok, err := s.Get("alpha"); err != nil || !ok || d.Policy != Deny {
		t.Fatalf("after reopening with Open: %+v, %v, %v", d, ok, err)
	}
}
