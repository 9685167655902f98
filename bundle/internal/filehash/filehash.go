// Package filehash computes the SHA-256 of files as fast as the platform
// allows, for building manifests and checking cached bundles.
//
// Bundles are often thousands of small files, where opening, reading and
// closing a file cost about as much as hashing its bytes; on Linux, Sum
// therefore uses raw system calls (no poller registration, no access-time
// update, one read for a file smaller than the buffer, no allocation), a
// Hasher (and HashDirs) opens files relative to their directory and hashes
// while its caller is still listing directories, and Each, Hasher and
// HashDirs hash from several goroutines at once.
package filehash

import (
	"crypto/sha256"
	"encoding/hex"
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
	d, n, err := sum(path, buf)
	if err != nil {
		return Result{}, err
	}
	return Result{SHA256: hex.EncodeToString(d[:]), Bytes: n}, nil
}

// digest is a SHA-256.
type digest = [sha256.Size]byte

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
