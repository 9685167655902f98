// Package filehash computes the SHA-256 of files as fast as the platform
// allows, for building manifests and checking cached bundles.
//
// Bundles are often thousands of small files, where opening and closing a
// file costs more than hashing its bytes; on Linux, Sum therefore uses raw
// system calls (no poller registration, no access-time update), HashDirs
// opens files relative to their directory, and both Each and HashDirs hash
// from several goroutines at once.
package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"runtime"
	"sync"
)

// BufferSize is the size of the read buffer each hashing goroutine needs.
const BufferSize = 64 << 10

// Result is the digest of one file.
type Result struct {
	SHA256 string // 64 lowercase hex digits
	Bytes  int64
}

// Sum returns the SHA-256 and size of the regular file at path, reading it
// through buf (of BufferSize bytes; Sum allocates one when buf is nil). A
// symbolic link is not followed: it is an error.
func Sum(path string, buf []byte) (Result, error) {
	if len(buf) == 0 {
		buf = make([]byte, BufferSize)
	}
	h := sha256.New()
	n, err := sum(path, h, buf)
	if err != nil {
		return Result{}, err
	}
	var d [sha256.Size]byte
	return Result{SHA256: hex.EncodeToString(h.Sum(d[:0])), Bytes: n}, nil
}

// hashWriter is what sum needs from a hash.
type hashWriter = hash.Hash

// Each hashes every path with up to workers goroutines (0 means
// GOMAXPROCS) and calls fn with each outcome, one call at a time, in no
// particular order. When fn returns false no further file is started.
func Each(paths []string, workers int, fn func(i int, r Result, err error) bool) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(paths))
	var (
		mu      sync.Mutex
		next    int
		stopped bool
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			buf := make([]byte, BufferSize)
			for {
				mu.Lock()
				if stopped || next >= len(paths) {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				r, err := Sum(paths[i], buf)
				mu.Lock()
				if !stopped && !fn(i, r, err) {
					stopped = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
