package cache

import (
	"os"

	"golang.org/x/sys/unix"
)

// flushTree makes everything written under dir durable: one syncfs of its
// file system, far cheaper than an fsync per file for thousands of small
// files.
func flushTree(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
