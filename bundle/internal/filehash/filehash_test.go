package filehash_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"example.com/pifleet/bundle/internal/filehash"
)

func TestSumMatchesSHA256(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, filehash.BufferSize - 1, filehash.BufferSize, 3*filehash.BufferSize + 7} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		p := filepath.Join(dir, strconv.Itoa(size))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(data)
		got, err := filehash.Sum(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.SHA256 != hex.EncodeToString(want[:]) || got.Bytes != int64(size) {
			t.Errorf("size %d: got %+v, want %x", size, got, want)
		}
	}
}

func TestSumRefusesSymlinksAndMissingFiles(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := filehash.Sum(filepath.Join(dir, "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symlinks: %v", err)
	}
	if _, err := filehash.Sum(link, nil); err == nil {
		t.Error("Sum followed a symbolic link")
	}
}

func TestEachReportsEveryFile(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 50 {
		p := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(p, []byte(strconv.Itoa(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	paths = append(paths, filepath.Join(dir, "nope"))
	seen := make([]bool, len(paths))
	filehash.Each(paths, 4, func(i int, r filehash.Result, err error) bool {
		seen[i] = true
		if i == len(paths)-1 {
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("missing file: %v", err)
			}
			return true
		}
		want := sha256.Sum256([]byte(strconv.Itoa(i)))
		if err != nil || r.SHA256 != hex.EncodeToString(want[:]) {
			t.Errorf("file %d: %+v, %v", i, r, err)
		}
		return true
	})
	for i, s := range seen {
		if !s {
			t.Errorf("file %d not reported", i)
		}
	}
}

func TestHashDirs(t *testing.T) {
	root := t.TempDir()
	var dirs []filehash.Dir
	for d := range 3 {
		dir := filepath.Join(root, strconv.Itoa(d))
		os.Mkdir(dir, 0o755)
		fd := filehash.Dir{Path: dir}
		for i := range 150 { // more than one batch per directory
			name := strconv.Itoa(i)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(strconv.Itoa(d*1000+i)), 0o644); err != nil {
				t.Fatal(err)
			}
			fd.Names = append(fd.Names, name)
		}
		dirs = append(dirs, fd)
	}
	out, err := filehash.HashDirs(dirs, 3)
	if err != nil {
		t.Fatal(err)
	}
	for d := range dirs {
		for i := range dirs[d].Names {
			want := sha256.Sum256([]byte(strconv.Itoa(d*1000 + i)))
			if out[d][i].SHA256 != hex.EncodeToString(want[:]) {
				t.Fatalf("dir %d file %d: wrong digest", d, i)
			}
		}
	}
	dirs[1].Names = append(dirs[1].Names, "missing")
	if _, err := filehash.HashDirs(dirs, 3); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("HashDirs with a missing file: %v", err)
	}
	if err := os.Symlink(filepath.Join(root, "0", "0"), filepath.Join(root, "0", "link")); err == nil {
		if _, err := filehash.HashDirs([]filehash.Dir{{Path: filepath.Join(root, "0"), Names: []string{"link"}}}, 1); err == nil {
			t.Error("HashDirs followed a symbolic link")
		}
	}
}

// TestHasherDrainsAfterAnError adds far more batches than the queue holds
// behind a file that fails: Add must not wait forever once the workers
// stopped hashing, and Wait reports the failure.
func TestHasherDrainsAfterAnError(t *testing.T) {
	dir := t.TempDir()
	names := make([]string, 64*50)
	for i := range names {
		names[i] = strconv.Itoa(i)
		if err := os.WriteFile(filepath.Join(dir, names[i]), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := filehash.NewHasher(1)
	h.Add(filehash.Dir{Path: dir, Names: []string{"missing"}})
	for range 4 {
		h.Add(filehash.Dir{Path: dir, Names: names})
	}
	if err := h.Wait(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Wait = %v, want fs.ErrNotExist", err)
	}
}
