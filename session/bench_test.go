package session

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The search benchmark reads this much generated JSONL. Its default keeps
// `go test -bench .` quick; the 1 GiB figure is measured with
//
//	go test ./session -run '^$' -bench BenchmarkSearch -session.search-bytes=1073741824
var searchBytes = flag.Int64("session.search-bytes", 64<<20, "bytes of session JSONL BenchmarkSearch generates")

var words = strings.Fields(`the a to of and in is it for on that with as this be are go test file
function error return value package import struct interface method pointer slice map channel
goroutine context deadline build module tidy vet lint format review commit branch merge rebase
patch diff server agent worker session bundle manifest hash sync registry cursor entry leaf`)

// writeSession writes a plausible pi session of about size bytes.
func writeSession(tb testing.TB, path string, rng *rand.Rand, size int, name string) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	n, _ := fmt.Fprintf(w, `{"type":"session","version":3,"id":"%s","timestamp":"2026-05-01T00:00:00.000Z","cwd":"/work/bench"}`+"\n", filepath.Base(path))
	parent := "null"
	var text strings.Builder
	for i := 0; n < size; i++ {
		text.Reset()
		for range 20 + rng.IntN(200) {
			text.WriteString(words[rng.IntN(len(words))])
			text.WriteByte(' ')
		}
		id := fmt.Sprintf("%08x", i)
		role := [...]string{"user", "assistant", "toolResult"}[i%3]
		k, _ := fmt.Fprintf(w, `{"type":"message","id":"%s","parentId":%s,"timestamp":"2026-05-01T00:00:01.000Z","message":{"role":"%s","content":[{"type":"text","text":"%s"}],"timestamp":1777593601000}}`+"\n",
			id, parent, role, text.String())
		n += k
		parent = `"` + id + `"`
		if i == 3 && name != "" {
			k, _ = fmt.Fprintf(w, `{"type":"session_info","id":"n%07x","parentId":%s,"timestamp":"2026-05-01T00:00:02.000Z","name":"%s"}`+"\n", i, parent, name)
			n += k
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// sessionTree writes count sessions of about size bytes each under root,
// 100 per directory as pi lays them out by cwd.
func sessionTree(tb testing.TB, root string, count, size int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range count {
		dir := filepath.Join(root, fmt.Sprintf("--work-repo%03d--", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		writeSession(tb, filepath.Join(dir, fmt.Sprintf("2026-05-01T00-00-00-000Z_%08d.jsonl", i)), rng, size, fmt.Sprintf("task:t%d:bench", i))
	}
}

// BenchmarkList lists 10,000 session files of ~2 KiB: cold (a new Lister
// reads every file) and warm (a re-list of unchanged files, one stat each).
func BenchmarkList(b *testing.B) {
	root := b.TempDir()
	sessionTree(b, root, 10_000, 2048)
	ctx := context.Background()
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			l, err := NewLister(root).List(ctx)
			if err != nil || len(l.Sessions) != 10_000 {
				b.Fatal(len(l.Sessions), err)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		lister := NewLister(root)
		if _, err := lister.List(ctx); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			l, err := lister.List(ctx)
			if err != nil || len(l.Sessions) != 10_000 {
				b.Fatal(len(l.Sessions), err)
			}
		}
	})
}

// BenchmarkSearch searches -session.search-bytes of session JSONL (files of
// 4 MiB, under the 20 MiB limit) for a query that is not there, so every
// byte is read: the worst case. "rare" has a rare letter to anchor on,
// "common" only frequent ones.
func BenchmarkSearch(b *testing.B) {
	const fileSize = 4 << 20
	root := b.TempDir()
	count := max(1, int(*searchBytes/fileSize))
	sessionTree(b, root, count, fileSize)
	l, err := NewLister(root).List(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, s := range l.Sessions {
		st, err := os.Stat(s.Path)
		if err != nil {
			b.Fatal(err)
		}
		total += st.Size()
	}
	for _, q := range []struct{ name, query string }{{"rare", "quokka jump"}, {"common", "the errors test"}} {
		b.Run(q.name, func(b *testing.B) {
			b.SetBytes(total)
			for b.Loop() {
				res, err := Search(context.Background(), l.Sessions, q.query, SearchOptions{})
				if err != nil || len(res.Hits) != 0 || res.Bytes != total {
					b.Fatalf("hits %d, bytes %d of %d, %v", len(res.Hits), res.Bytes, total, err)
				}
			}
		})
	}
}

// BenchmarkSummarize streams one 64 MiB session file.
func BenchmarkSummarize(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.jsonl")
	writeSession(b, path, rand.New(rand.NewPCG(3, 4)), 64<<20, "big")
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	for b.Loop() {
		if s, err := Summarize(path); err != nil || s.Name != "big" {
			b.Fatal(s.Name, err)
		}
	}
}

// BenchmarkCursorNext reads the last entries of a 64 MiB file through a
// stored cursor (seek and validate) and, for comparison, by id (scan).
func BenchmarkCursorNext(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.jsonl")
	writeSession(b, path, rand.New(rand.NewPCG(5, 6)), 64<<20, "")
	f, err := Read(path)
	if err != nil {
		b.Fatal(err)
	}
	last := f.Entries[len(f.Entries)-4]
	cur := Cursor{Path: path, SessionID: f.Header.ID, EntryID: last.ID, Line: last.Line, Offset: last.Offset, End: last.End}
	b.Run("cursor", func(b *testing.B) {
		for b.Loop() {
			if es, _, err := cur.Next(0); err != nil || len(es) != 3 {
				b.Fatal(len(es), err)
			}
		}
	})
	b.Run("by-id", func(b *testing.B) {
		for b.Loop() {
			if es, _, err := EntriesAfter(path, last.ID); err != nil || len(es) != 3 {
				b.Fatal(len(es), err)
			}
		}
	})
}
