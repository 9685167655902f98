//go:build !linux

package filehash

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func sum(path string, buf []byte) (digest, int64, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return digest{}, 0, err
	}
	if !fi.Mode().IsRegular() {
		return digest{}, 0, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return digest{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.CopyBuffer(h, f, buf)
	if err != nil {
		return digest{}, 0, err
	}
	var d digest
	h.Sum(d[:0])
	return d, n, nil
}

func sumBatch(dir string, names []string, sums []digest, sizes []int64, buf []byte) error {
	return sumBatchByPath(dir, names, sums, sizes, buf)
}

// sumBatchByPath is the portable sumBatch: one full path per file.
func sumBatchByPath(dir string, names []string, sums []digest, sizes []int64, buf []byte) error {
	for i, n := range names {
		var err error
		sums[i], sizes[i], err = sum(filepath.Join(dir, n), buf)
		if err != nil {
			return fmt.Errorf("hashing %s: %w", filepath.Join(dir, n), err)
		}
	}
	return nil
}
