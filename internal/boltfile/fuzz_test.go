package boltfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// sealMetas recomputes the checksums of the two meta pages of b (page
// size ps), so that the fuzzer's changes reach the pages behind them.
func sealMetas(b []byte, ps int) {
	for _, at := range []int{0, ps} {
		m := at + pageHeaderSize
		if m+metaSize > len(b) {
			return
		}
		h := fnv.New64a()
		h.Write(b[m : m+metaChecksumEnd])
		binary.LittleEndian.PutUint64(b[m+metaChecksumEnd:], h.Sum64())
	}
}

// FuzzOpen opens arbitrary bytes as a state file: the result is an open
// database or a *CorruptError (or a *VersionError), never a panic, a
// crash or a hang. Half the inputs get their header checksums repaired,
// so that damage behind the header reaches the page checks and bbolt.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	spec := Spec{Dir: dir, File: "seed.db", Layout: "1", Buckets: [][]byte{[]byte("a")}}
	db, err := Open(spec)
	if err != nil {
		f.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range 100 {
			if err := tx.Bucket([]byte("a")).Put(fmt.Appendf(nil, "key-%03d", i), fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
				return err
			}
		}
		_, err := tx.Bucket([]byte("a")).CreateBucket([]byte("nested"))
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	db.Close()
	seed, err := os.ReadFile(filepath.Join(dir, "seed.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed, true)
	f.Add(seed[:len(seed)/2], false)
	f.Add([]byte{}, false)
	f.Add([]byte("not a database"), false)
	ps := os.Getpagesize()
	f.Fuzz(func(t *testing.T, b []byte, seal bool) {
		if len(b) > 1<<20 {
			return
		}
		b = append([]byte(nil), b...)
		if seal {
			sealMetas(b, ps)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x.db"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := Open(Spec{Dir: dir, File: "x.db", Layout: "1", Buckets: [][]byte{[]byte("a")}})
		var ce *CorruptError
		var ve *VersionError
		switch {
		case err == nil:
			db.Close()
		case errors.As(err, &ce), errors.As(err, &ve):
		default:
			t.Fatalf("open: %v, want nil, a *CorruptError or a *VersionError", err)
		}
	})
}
