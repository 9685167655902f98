package boltfile_test

import (
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/internal/boltfile"
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
