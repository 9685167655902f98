package fsservice

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/transport"
)

// BenchmarkReadHugeFirstPage reads the first page of a 100 MiB file: the
// cost must not depend on the file's size.
func BenchmarkReadHugeFirstPage(b *testing.B) {
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.log"))
	if err != nil {
		b.Fatal(err)
	}
	line := strings.Repeat("log line with some text ", 4) + "\n"
	for range (1 << 20) / len(line) { // 1 MiB of real lines, then a sparse tail
		f.WriteString(line)
	}
	if err := f.Truncate(100 << 20); err != nil {
		b.Fatal(err)
	}
	f.Close()
	s := New(dir)
	req := &transport.FsReadFrame{Path: "huge.log"}
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Read(bg, req); res.Error != nil || !res.Truncated {
			b.Fatalf("%+v", res)
		}
	}
}

// BenchmarkReadSmall reads a small text file whole.
func BenchmarkReadSmall(b *testing.B) {
	dir, _ := fixture(b)
	s := New(dir)
	req := &transport.FsReadFrame{Path: "hello.txt"}
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Read(bg, req); res.Error != nil {
			b.Fatal(res.Error)
		}
	}
}

// BenchmarkGrepTree greps a tree of 500 files of 200 lines (about 5 MB).
func BenchmarkGrepTree(b *testing.B) {
	dir := b.TempDir()
	body := strings.Repeat("func handler(w http.ResponseWriter, r *http.Request) {}\n", 200)
	for i := range 500 {
		writeFile(b, dir, fmt.Sprintf("pkg%02d/file%03d.go", i%25, i), []byte(body))
	}
	writeFile(b, dir, "pkg07/needle.go", []byte("var needle = 1\n"))
	s := New(dir)
	req := &transport.FsGrepFrame{Pattern: `needle\s*=`, Glob: "**/*.go"}
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Grep(bg, req); res.Error != nil || *res.Text != "pkg07/needle.go:1:var needle = 1" {
			b.Fatalf("%+v", res)
		}
	}
}
