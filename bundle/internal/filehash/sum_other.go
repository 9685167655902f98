//go:build !linux

package filehash

import (
	"fmt"
	"io"
	"os"
)

func sum(path string, h hashWriter, buf []byte) (int64, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.CopyBuffer(h, f, buf)
}

func sumBatch(dir string, names []string, out []Result, buf []byte) error {
	return sumBatchByPath(dir, names, out, buf)
}
