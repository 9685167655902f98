package bundle_test

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"example.com/pifleet/bundle"
)

// The build benchmarks compare with BenchmarkSHA256Raw, run in the same
// invocation:
//
//	go test ./bundle -run '^$' -bench 'SHA256Raw|Build' -benchtime 3s -count 5
//
// Build hashes on every core (BuildOptions.Workers defaults to
// GOMAXPROCS), so the like-for-like bound of BenchmarkBuild is
// SHA256Raw/<size>/allcores: sha256 over data already in memory on every
// core, the machine's raw throughput. SHA256Raw/<size>/1core is one core's.
//
// Every benchmark also reports MB/cpu-s: bytes per second of CPU time the
// process used (user and system, every thread). On a machine that other
// work also loads, MB/s varies with what the others do; MB/cpu-s does much
// less, and the ratio of Build's MB/cpu-s to SHA256Raw's is the share of
// raw throughput a build reaches on an idle machine with every core busy.
//
// For small files that share is bounded by the system calls that open,
// read and close each file, which cost about 70% of hashing 4 KiB (1.3,
// 0.8 and 0.6 µs against 3.7 µs here). Profiled, a build of 2,000 × 4 KiB
// spends about 40% of its CPU time in sha256, 40% opening, reading and
// closing files and 12% listing directories: it reaches about 40% of raw,
// and no build that reads every file can reach 80% of it.

// reportCPU adds the MB/cpu-s metric to a benchmark that set its bytes per
// operation, given the process's CPU time when the timed loop started.
func reportCPU(b *testing.B, bytes int64, start time.Duration) {
	if cpu := processCPU() - start; cpu > 0 {
		b.ReportMetric(float64(bytes)*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
	}
}

func BenchmarkSHA256Raw(b *testing.B) {
	for _, size := range []int{4 << 10, 5 << 20} {
		data := make([]byte, size)
		b.Run(fmt.Sprintf("%dKiB/1core", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			start := processCPU()
			for b.Loop() {
				sha256.Sum256(data)
			}
			reportCPU(b, int64(size), start)
		})
		b.Run(fmt.Sprintf("%dKiB/allcores", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			start := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					sha256.Sum256(data)
				}
			})
			reportCPU(b, int64(size), start)
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
			start := processCPU()
			for b.Loop() {
				if _, err := bundle.Build(dir, "bench", bundle.Metadata{}, bundle.BuildOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, int64(tc.n*tc.size), start)
		})
	}
}
