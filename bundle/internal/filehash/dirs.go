package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"runtime"
	"sync"
	"sync/atomic"
)

// Dir names files of one directory.
type Dir struct {
	Path  string
	Names []string
}

// batchSize bounds the files one goroutine takes from a directory at a
// time, so that one large directory still spreads over every worker.
const batchSize = 64

// hexSize is the length of a digest in hex.
const hexSize = 2 * sha256.Size

// A Hasher hashes the files of directories on a fixed set of goroutines
// while its caller is still listing them, so that listing a tree and
// hashing it overlap. Add directories, then Wait once.
type Hasher struct {
	batches chan batch
	wg      sync.WaitGroup
	failed  atomic.Bool
	errOnce sync.Once
	err     error
}

// batch is up to batchSize files of one directory and where their results
// go.
type batch struct {
	dir   string
	names []string
	out   []Result
}

// NewHasher starts a Hasher with workers goroutines (0 means GOMAXPROCS).
func NewHasher(workers int) *Hasher {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	h := &Hasher{batches: make(chan batch, 4*workers)}
	for range workers {
		h.wg.Go(h.work)
	}
	return h
}

// Add queues the files of d and returns the slice their results will be
// in (out[j] for d.Names[j]), valid once Wait returned nil. Add waits while
// every worker is busy and the queue is full.
func (h *Hasher) Add(d Dir) []Result {
	out := make([]Result, len(d.Names))
	for from := 0; from < len(d.Names); from += batchSize {
		to := min(from+batchSize, len(d.Names))
		h.batches <- batch{d.Path, d.Names[from:to], out[from:to]}
	}
	return out
}

// Wait waits for every file added and returns the first error; after one,
// the files not yet started are skipped.
func (h *Hasher) Wait() error {
	close(h.batches)
	h.wg.Wait()
	return h.err
}

// work hashes batches until the queue closes; after an error it only
// drains the queue, so that Add never waits forever.
func (h *Hasher) work() {
	buf := make([]byte, BufferSize)
	var sums [batchSize]digest
	var sizes [batchSize]int64
	for b := range h.batches {
		if h.failed.Load() {
			continue
		}
		n := len(b.names)
		if err := sumBatch(b.dir, b.names, sums[:n], sizes[:n], buf); err != nil {
			h.errOnce.Do(func() { h.err = err })
			h.failed.Store(true)
			continue
		}
		// One string holds the batch's hex digests: one allocation, not
		// one per file.
		var hexes [batchSize * hexSize]byte
		for i := range n {
			hex.Encode(hexes[i*hexSize:], sums[i][:])
		}
		all := string(hexes[:n*hexSize])
		for i := range n {
			b.out[i] = Result{SHA256: all[i*hexSize : (i+1)*hexSize], Bytes: sizes[i]}
		}
	}
}

// HashDirs hashes every file of dirs with up to workers goroutines (0
// means GOMAXPROCS); out[i][j] is the digest of dirs[i].Names[j]. Files are
// opened relative to their directory where the platform allows, which
// spares the kernel a path walk per file. The first error stops the work.
func HashDirs(dirs []Dir, workers int) ([][]Result, error) {
	h := NewHasher(workers)
	out := make([][]Result, len(dirs))
	for i, d := range dirs {
		out[i] = h.Add(d)
	}
	if err := h.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}
