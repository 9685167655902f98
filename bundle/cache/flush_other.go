//go:build !linux

package cache

import (
	"io/fs"
	"os"
	"path/filepath"
)

// flushTree makes everything written under dir durable, one fsync per file
// and directory.
func flushTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() && !d.IsDir() {
			return nil
		}
		return syncPath(p)
	})
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	f.Sync() // directories cannot be synced on some platforms; files can
	return nil
}
