package boltfile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/internal/boltfile"
	"example.com/pifleet/internal/boltfile/boltfiletest"
)

func spec(dir, layout string) boltfile.Spec {
	return boltfile.Spec{Dir: dir, File: "x.db", Layout: layout, Buckets: [][]byte{[]byte("a"), []byte("b")}, LockTimeout: 50 * time.Millisecond}
}

func TestOpenCreatesBucketsAndStampsLayout(t *testing.T) {
	dir := t.TempDir()
	db, err := boltfile.Open(spec(dir, "1"))
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		for _, b := range []string{"meta", "a", "b"} {
			if tx.Bucket([]byte(b)) == nil {
				t.Errorf("bucket %s missing", b)
			}
		}
		if got := string(tx.Bucket(boltfile.MetaBucket).Get([]byte("layout"))); got != "1" {
			t.Errorf("layout stamp %q", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = boltfile.Open(spec(dir, "1"))
	if err != nil {
		t.Fatalf("reopen with the same layout: %v", err)
	}
	db.Close()
}

func TestOpenRefusesAnotherLayout(t *testing.T) {
	dir := t.TempDir()
	db, err := boltfile.Open(spec(dir, "1"))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = boltfile.Open(spec(dir, "2"))
	var ve *boltfile.VersionError
	if !errors.As(err, &ve) || ve.Got != "1" || ve.Want != "2" {
		t.Fatalf("got %v, want a VersionError 1 vs 2", err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	db, err := boltfile.Open(spec(dir, "1"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := boltfile.Open(spec(dir, "1")); !errors.Is(err, boltfile.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

// jsonSpec is a spec whose records in bucket a are JSON objects.
func jsonSpec(dir string) boltfile.Spec {
	s := spec(dir, "1")
	s.Verify = func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("a")).ForEach(func(k, v []byte) error {
			var rec map[string]any
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("record a/%s: %w", k, err)
			}
			return nil
		})
	}
	return s
}

// populate writes enough records into a new file at dir to spread it
// over several pages.
func populate(t *testing.T, dir string) {
	t.Helper()
	db, err := boltfile.Open(jsonSpec(dir))
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range 200 {
			v := fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("x", 100))
			if err := tx.Bucket([]byte("a")).Put(fmt.Appendf(nil, "k%03d", i), []byte(v)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("b")).Put([]byte("one"), []byte(`{}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func wantCorrupt(t *testing.T, err error, path string) {
	t.Helper()
	t.Log(err)
	var ce *boltfile.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, boltfile.ErrCorrupt) {
		t.Fatalf("open: %v, want a *CorruptError", err)
	}
	if ce.Path != path || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "--reset-state") {
		t.Errorf("error %q does not name %s and what to do", err, path)
	}
}

// Every corruption of an existing file is a *CorruptError naming it, the
// file is left as it was, and ResetCorrupt moves it aside and starts
// afresh (#16 defect 7).
func TestOpenRefusesCorruptFiles(t *testing.T) {
	for _, c := range boltfiletest.Corruptions(boltfile.MetaBucket, [][]byte{[]byte("a"), []byte("b")},
		boltfiletest.Record{Bucket: []byte("a"), Key: []byte("k007")}) {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			populate(t, dir)
			path := filepath.Join(dir, "x.db")
			c.Damage(t, path)
			damaged, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = boltfile.Open(jsonSpec(dir))
			wantCorrupt(t, err, path)
			if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
				t.Errorf("the corrupt file was changed by the refused open")
			}

			s := jsonSpec(dir)
			s.ResetCorrupt = true
			var moved string
			s.OnReset = func(to string, cause error) { moved = to }
			db, err := boltfile.Open(s)
			if err != nil {
				t.Fatalf("open with ResetCorrupt: %v", err)
			}
			defer db.Close()
			if !strings.HasPrefix(filepath.Base(moved), "x.db.corrupt-") {
				t.Errorf("moved to %q", moved)
			}
			if kept, err := os.ReadFile(moved); err != nil || !bytes.Equal(kept, damaged) {
				t.Errorf("the file moved aside differs from the corrupt one (%v)", err)
			}
			err = db.View(func(tx *bolt.Tx) error {
				if k, _ := tx.Bucket([]byte("a")).Cursor().First(); k != nil {
					t.Errorf("the new file holds %s", k)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A file that does not exist is a first start; a file bbolt made whose
// first transaction never committed (an older version's crash) held
// nothing and is completed; neither is an error.
func TestOpenStartsFreshOnlyWhereNothingWasStored(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "x.db"), 0o600, nil) // bbolt's own empty file: no buckets
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = boltfile.Open(spec(dir, "1"))
	if err != nil {
		t.Fatalf("open of a file with no buckets at all: %v", err)
	}
	db.Close()
	if left, _ := filepath.Glob(filepath.Join(dir, "x.db.*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// bbolt keeps two header pages and falls back to the older when the newer
// is damaged (the newest transaction is lost, the file is consistent):
// Open does too.
func TestOpenFallsBackToTheOtherHeaderPage(t *testing.T) {
	dir := t.TempDir()
	populate(t, dir)
	path := filepath.Join(dir, "x.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int64(os.Getpagesize())
	for i := ps + 16; i < ps+80; i++ {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := boltfile.Open(jsonSpec(dir))
	if err != nil {
		t.Fatalf("open with one damaged header page: %v", err)
	}
	db.Close()
}
