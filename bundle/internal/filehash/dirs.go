package filehash

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
)

// Dir names files of one directory.
type Dir struct {
	Path  string
	Names []string
}

// batchSize bounds the files one goroutine takes from a directory at a
// time, so that one large directory still spreads over every worker.
const batchSize = 64

// HashDirs hashes every file of dirs with up to workers goroutines (0
// means GOMAXPROCS); out[i][j] is the digest of dirs[i].Names[j]. Files are
// opened relative to their directory where the platform allows, which
// spares the kernel a path walk per file. The first error stops the work.
func HashDirs(dirs []Dir, workers int) ([][]Result, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	type batch struct{ dir, from, to int }
	var batches []batch
	out := make([][]Result, len(dirs))
	for i, d := range dirs {
		out[i] = make([]Result, len(d.Names))
		for from := 0; from < len(d.Names); from += batchSize {
			batches = append(batches, batch{i, from, min(from+batchSize, len(d.Names))})
		}
	}
	var (
		mu       sync.Mutex
		next     int
		firstErr error
		wg       sync.WaitGroup
	)
	for range min(workers, len(batches)) {
		wg.Go(func() {
			buf := make([]byte, BufferSize)
			for {
				mu.Lock()
				if firstErr != nil || next >= len(batches) {
					mu.Unlock()
					return
				}
				b := batches[next]
				next++
				mu.Unlock()
				d := dirs[b.dir]
				err := sumBatch(d.Path, d.Names[b.from:b.to], out[b.dir][b.from:b.to], buf)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return out, nil
}

// sumBatchByPath is the portable sumBatch: one full path per file.
func sumBatchByPath(dir string, names []string, out []Result, buf []byte) error {
	for i, n := range names {
		r, err := Sum(filepath.Join(dir, n), buf)
		if err != nil {
			return fmt.Errorf("hashing %s: %w", filepath.Join(dir, n), err)
		}
		out[i] = r
	}
	return nil
}
