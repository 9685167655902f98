// Package boltfiletest damages state files for tests: the corruptions a
// store opened through boltfile must refuse with a *boltfile.CorruptError
// naming the file, never a panic and never an empty start.
package boltfiletest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"example.com/pifleet/internal/boltfile"
)

// Corruption damages a state file.
type Corruption struct {
	Name string
	// Damage changes the (closed) file at path.
	Damage func(t testing.TB, path string)
}

// Record names a stored record whose value a corruption replaces with
// bytes that do not decode.
type Record struct {
	Bucket, Key []byte
}

// Corruptions returns the damages to try on a state file whose layout
// stamp is in bucket meta (nil: a file without one), holding buckets
// (every other bucket the store requires) and records.
func Corruptions(meta []byte, buckets [][]byte, records ...Record) []Corruption {
	cs := []Corruption{
		{"empty file", func(t testing.TB, path string) { truncate(t, path, func(int64, int64) int64 { return 0 }) }},
		{"truncated inside the first header page", func(t testing.TB, path string) {
			truncate(t, path, func(int64, int64) int64 { return 100 })
		}},
		{"truncated inside the second header page", func(t testing.TB, path string) {
			truncate(t, path, func(ps, _ int64) int64 { return ps + 100 })
		}},
		{"truncated after the header pages", func(t testing.TB, path string) {
			truncate(t, path, func(ps, _ int64) int64 { return 2 * ps })
		}},
		{"truncated in the middle", func(t testing.TB, path string) {
			truncate(t, path, func(ps, used int64) int64 { return used / 2 })
		}},
		{"last page cut off", func(t testing.TB, path string) {
			truncate(t, path, func(ps, used int64) int64 { return used - ps })
		}},
		{"last page cut in half", func(t testing.TB, path string) {
			truncate(t, path, func(ps, used int64) int64 { return used - ps/2 })
		}},
		{"bad magic in both header pages", func(t testing.TB, path string) {
			overwrite(t, path, func(g geom, b []byte) {
				copy(b[16:20], []byte{0xde, 0xad, 0xbe, 0xef})
				copy(b[g.pageSize+16:g.pageSize+20], []byte{0xde, 0xad, 0xbe, 0xef})
			})
		}},
		{"random bytes over both header pages", func(t testing.TB, path string) {
			overwrite(t, path, func(g geom, b []byte) {
				fill(b[16:g.pageSize], 1)
				fill(b[g.pageSize+16:2*g.pageSize], 2)
			})
		}},
		{"not a bbolt file", func(t testing.TB, path string) {
			if err := os.WriteFile(path, []byte("this is not a database\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	// Pages in use (branch, leaf and the free-page list), each in turn:
	// wholly overwritten, the header only, or the element table pointing
	// outside the page.
	for n := range 3 {
		cs = append(cs,
			Corruption{fmt.Sprintf("random bytes over used page %d", n), func(t testing.TB, path string) {
				overwrite(t, path, func(g geom, b []byte) {
					p := g.pick(n)
					fill(b[p*g.pageSize:(p+1)*g.pageSize], uint64(10+n))
				})
			}},
			Corruption{fmt.Sprintf("random header of used page %d", n), func(t testing.TB, path string) {
				overwrite(t, path, func(g geom, b []byte) {
					p := g.pick(n)
					fill(b[p*g.pageSize+8:p*g.pageSize+16], uint64(20+n))
				})
			}},
			Corruption{fmt.Sprintf("element table of used page %d out of its page", n), func(t testing.TB, path string) {
				overwrite(t, path, func(g geom, b []byte) {
					p := g.pick(n)
					for i := p*g.pageSize + 16; i < p*g.pageSize+16+64; i++ {
						b[i] = 0xff
					}
				})
			}},
		)
	}
	if meta != nil { // nil: a file without a layout stamp
		buckets = append([][]byte{meta}, buckets...)
		cs = append(cs, Corruption{"layout stamp missing", func(t testing.TB, path string) {
			update(t, path, func(tx *bolt.Tx) error { return tx.Bucket(meta).Delete([]byte("layout")) })
		}})
	}
	for _, name := range buckets {
		cs = append(cs, Corruption{"bucket " + string(name) + " missing", func(t testing.TB, path string) {
			update(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket(name) })
		}})
	}
	for _, r := range records {
		cs = append(cs, Corruption{"garbage in record " + string(r.Bucket) + "/" + string(r.Key), func(t testing.TB, path string) {
			update(t, path, func(tx *bolt.Tx) error { return tx.Bucket(r.Bucket).Put(r.Key, []byte("{\"not json")) })
		}})
	}
	return cs
}

// geom is the shape of a bbolt file.
type geom struct {
	pageSize, used int64   // used: the high-water mark, in bytes
	inUse          []int64 // pages of the tree and the free-page list
}

// pick returns the nth page in use (cycling).
func (g geom) pick(n int) int64 { return g.inUse[n%len(g.inUse)] }

// geometry reads the shape of the bbolt file at path.
func geometry(t testing.TB, path string) geom {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("open %s to damage it: %v", path, err)
	}
	defer db.Close()
	var g geom
	// Page needs the free list, which a writer loads. The writer is
	// rolled back: a commit would move the free list to another page, and
	// the page listed here would be free by the time it is damaged.
	errRollBack := errors.New("rolled back")
	err = db.Update(func(tx *bolt.Tx) error {
		g.pageSize, g.used = int64(db.Info().PageSize), tx.Size()
		for id := 2; ; id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p == nil {
				break
			}
			if p.Type == "branch" || p.Type == "leaf" || p.Type == "freelist" {
				g.inUse = append(g.inUse, int64(id))
			}
		}
		return errRollBack
	})
	if !errors.Is(err, errRollBack) {
		t.Fatal(err)
	}
	if len(g.inUse) == 0 {
		t.Fatalf("%s has no pages in use", path)
	}
	return g
}

func truncate(t testing.TB, path string, at func(pageSize, used int64) int64) {
	t.Helper()
	g := geometry(t, path)
	if err := os.Truncate(path, at(g.pageSize, g.used)); err != nil {
		t.Fatal(err)
	}
}

func overwrite(t testing.TB, path string, damage func(g geom, b []byte)) {
	t.Helper()
	g := geometry(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage(g, b[:g.used])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func update(t testing.TB, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// fill overwrites b with bytes from a fixed seed, the same on every run.
func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// Store is a store under test: how to fill its state file and open it.
type Store struct {
	// File is the state file's name inside the directory.
	File string
	// Populate writes a state file holding records of every kind into
	// dir, and closes it.
	Populate func(t *testing.T, dir string)
	// Open opens the store in dir; a non-nil onReset asks it to move a
	// corrupt file aside (and be told where) instead of failing.
	Open func(dir string, onReset func(movedTo string, cause error)) (io.Closer, error)
	// Empty reports whether the opened store holds no records.
	Empty func(t *testing.T, opened io.Closer) bool
}

// Refuses damages a freshly populated file with each corruption in turn:
// opening it must fail with a *boltfile.CorruptError naming the file (a
// panic fails the test), and opening it with a reset must start empty,
// with the damaged file kept beside it under <File>.corrupt-<time>.
func Refuses(t *testing.T, s Store, cs []Corruption) {
	for _, c := range cs {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			s.Populate(t, dir)
			path := filepath.Join(dir, s.File)
			c.Damage(t, path)

			_, err := s.Open(dir, nil)
			var ce *boltfile.CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, boltfile.ErrCorrupt) || ce.Path != path {
				t.Fatalf("open: %v, want a *boltfile.CorruptError naming %s", err, path)
			}

			var moved string
			opened, err := s.Open(dir, func(to string, _ error) { moved = to })
			if err != nil {
				t.Fatalf("open with a reset: %v", err)
			}
			defer opened.Close()
			if _, err := os.Stat(moved); err != nil || !strings.HasPrefix(filepath.Base(moved), s.File+".corrupt-") {
				t.Errorf("moved aside to %q: %v", moved, err)
			}
			if !s.Empty(t, opened) {
				t.Error("the new file is not empty")
			}
		})
	}
}
