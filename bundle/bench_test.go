package bundle_test

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"example.com/pifleet/bundle"
)

// The build benchmarks compare with BenchmarkSHA256Raw, run in the same
// invocation:
//
//	go test ./bundle -run '^$' -bench 'SHA256Raw|Build' -benchtime 3s
//
// Build hashes on every core (BuildOptions.Workers defaults to
// GOMAXPROCS), so the like-for-like bound of BenchmarkBuild is
// SHA256Raw/<size>/allcores: sha256 over data already in memory on every
// core. SHA256Raw/<size>/1core is one core's bound. For small files the
// build also pays, per file, the system calls that open, read and close it,
// which cost about as much CPU as hashing 4 KiB: no build of 2,000 × 4 KiB
// files reaches the allcores figure.

func BenchmarkSHA256Raw(b *testing.B) {
	for _, size := range []int{4 << 10, 5 << 20} {
		data := make([]byte, size)
		b.Run(fmt.Sprintf("%dKiB/1core", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				sha256.Sum256(data)
			}
		})
		b.Run(fmt.Sprintf("%dKiB/allcores", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					sha256.Sum256(data)
				}
			})
		})
	}
}

// benchTree writes n files of size bytes of random content in 20
// directories.
func benchTree(b *testing.B, n, size int) string {
	b.Helper()
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, size)
	for i := range n {
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func BenchmarkBuild(b *testing.B) {
	for _, tc := range []struct{ n, size int }{{2000, 4 << 10}, {20, 5 << 20}} {
		b.Run(fmt.Sprintf("%dx%dKiB", tc.n, tc.size>>10), func(b *testing.B) {
			dir := benchTree(b, tc.n, tc.size)
			b.SetBytes(int64(tc.n * tc.size))
			for b.Loop() {
				if _, err := bundle.Build(dir, "bench", bundle.Metadata{}, bundle.BuildOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
