package cache_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
)

// The sync benchmarks fetch from a registry server running in another
// process (this test binary, re-executed), over loopback HTTP:
//
//	go test ./bundle/cache -run '^$' -bench . -benchtime 20x
//
// BenchmarkDiskAndHash measures, in the same run, the floor a sync cannot
// beat: writing the same files and hashing them, with no network.

// registryProcess starts a registry server for root in a child process and
// returns its URL; it stops with the benchmark.
func registryProcess(b *testing.B, root string) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=registry", "CHILD_ROOT="+root)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		b.Fatalf("registry process said %q, %v", line, err)
	}
	return strings.TrimSpace(line)
}

// benchSource writes n files of size random bytes in 20 directories.
func benchSource(b *testing.B, n, size int) string {
	b.Helper()
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
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

type benchBundle struct {
	src, url string
	regRoot  string
	m        *bundle.Manifest
	reg      registry.Client
}

func publishBench(b *testing.B, n, size int) *benchBundle {
	b.Helper()
	bb := &benchBundle{src: benchSource(b, n, size), regRoot: b.TempDir()}
	m, err := registry.Publish(bb.regRoot, "bench", bb.src, registry.PublishOptions{})
	if err != nil {
		b.Fatal(err)
	}
	bb.m = m
	bb.url = registryProcess(b, bb.regRoot)
	bb.reg, err = registry.NewHTTP(bb.url)
	if err != nil {
		b.Fatal(err)
	}
	return bb
}

func BenchmarkSync(b *testing.B) {
	for _, tc := range []struct{ n, size int }{{2000, 4 << 10}, {20, 5 << 20}} {
		b.Run(fmt.Sprintf("%dx%dKiB", tc.n, tc.size>>10), func(b *testing.B) {
			bb := publishBench(b, tc.n, tc.size)
			ctx := context.Background()
			for _, durable := range []bool{true, false} {
				name := "cold"
				if !durable {
					name = "cold-nofsync"
				}
				b.Run(name, func(b *testing.B) {
					b.SetBytes(bb.m.TotalBytes())
					for range b.N {
						b.StopTimer()
						c, err := cache.Open(b.TempDir(), cache.WithDurability(durable))
						if err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
						res, err := c.Sync(ctx, bb.reg, "bench", cache.SyncOptions{})
						if err != nil || len(res.Fetched) != tc.n {
							b.Fatalf("cold sync: %v", err)
						}
					}
				})
			}
			c, err := cache.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Sync(ctx, bb.reg, "bench", cache.SyncOptions{}); err != nil {
				b.Fatal(err)
			}
			b.Run("warm", func(b *testing.B) {
				for b.Loop() {
					res, err := c.Sync(ctx, bb.reg, "bench", cache.SyncOptions{})
					if err != nil || !res.CacheHit {
						b.Fatalf("warm sync: %v", err)
					}
				}
			})
			// A new client per sync: no remembered manifest, a new TCP
			// connection, as in a freshly started worker.
			b.Run("warm-newclient", func(b *testing.B) {
				for b.Loop() {
					reg, err := registry.NewHTTP(bb.url)
					if err != nil {
						b.Fatal(err)
					}
					res, err := c.Sync(ctx, reg, "bench", cache.SyncOptions{})
					if err != nil || !res.CacheHit {
						b.Fatalf("warm sync: %v", err)
					}
					reg.CloseIdleConnections()
				}
			})
			version := 0 // across the runs of the sub-benchmark: every sync sees a new version
			b.Run("one-changed", func(b *testing.B) {
				changed := filepath.Join(bb.src, filepath.FromSlash(bb.m.Files[0].Path))
				for range b.N {
					b.StopTimer()
					version++
					if err := os.WriteFile(changed, fmt.Appendf(nil, "version %d", version), 0o644); err != nil {
						b.Fatal(err)
					}
					if _, err := registry.Publish(bb.regRoot, "bench", bb.src, registry.PublishOptions{}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					res, err := c.Sync(ctx, bb.reg, "bench", cache.SyncOptions{})
					if err != nil || len(res.Fetched) != 1 || len(res.Reused) != tc.n-1 {
						b.Fatalf("sync of one change: %v", err)
					}
				}
			})
		})
	}
}

// BenchmarkDiskAndHash is the work of a cold sync without the network:
// create the files, write them and hash them, with as many goroutines as a
// sync uses, then flush the file system as a durable sync does.
func BenchmarkDiskAndHash(b *testing.B) {
	for _, tc := range []struct{ n, size int }{{2000, 4 << 10}, {20, 5 << 20}} {
		b.Run(fmt.Sprintf("%dx%dKiB", tc.n, tc.size>>10), func(b *testing.B) {
			data := make([]byte, tc.size)
			for i := range data {
				data[i] = byte(i * 31)
			}
			b.SetBytes(int64(tc.n * tc.size))
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				for d := range 20 {
					os.Mkdir(filepath.Join(dir, fmt.Sprintf("d%02d", d)), 0o755)
				}
				b.StartTimer()
				var next atomic.Int64
				var wg sync.WaitGroup
				for range cache.DefaultConcurrency {
					wg.Go(func() {
						for {
							i := int(next.Add(1) - 1)
							if i >= tc.n {
								return
							}
							f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.bin", i)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
							if err != nil {
								panic(err)
							}
							h := sha256.New()
							io.MultiWriter(f, h).Write(data)
							h.Sum(nil)
							f.Close()
						}
					})
				}
				wg.Wait()
				if err := cache.FlushForBench(dir); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
