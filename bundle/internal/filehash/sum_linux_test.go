package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Files big enough to be hashed through a mapping give the same digest as
// hashing their bytes, whatever their size around the buffer and page
// boundaries.
func TestSumOfMappedFiles(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{BufferSize + mapThreshold - 1, BufferSize + mapThreshold, BufferSize + mapThreshold + 1, 3<<20 + 17} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i>>9)
		}
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Sum(p, nil)
		want := sha256.Sum256(data)
		if err != nil || r.SHA256 != hex.EncodeToString(want[:]) || r.Bytes != int64(size) {
			t.Fatalf("size %d: %+v, %v", size, r, err)
		}
	}
}

// truncatingHash truncates the file on its first write, then touches the
// end of what it was given: a mapping of the old length faults there.
type truncatingHash struct {
	path string
	sum  int
}

func (h *truncatingHash) Write(p []byte) (int, error) {
	if err := os.Truncate(h.path, 0); err != nil {
		return 0, err
	}
	h.sum += int(p[len(p)-1])
	return len(p), nil
}
func (h *truncatingHash) Sum(b []byte) []byte { return b }
func (h *truncatingHash) Reset()              {}
func (h *truncatingHash) Size() int           { return 0 }
func (h *truncatingHash) BlockSize() int      { return 1 }

// A file truncated while it is hashed through a mapping is an error, not
// a crash of the process (SIGBUS).
func TestMappedFileTruncatedMeanwhile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, make([]byte, 2*mapThreshold), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := hashMapped(int(f.Fd()), &truncatingHash{path: p}, 0)
	if err == nil || n != 0 || !strings.Contains(err.Error(), "changed while it was hashed") {
		t.Fatalf("hashMapped of a truncated file = %d, %v", n, err)
	}
}
