package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers on many goroutines lose nothing and race with no reader.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if n, err := b.Write([]byte("x")); n != 1 || err != nil {
					t.Errorf("Write = %d, %v", n, err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 800) {
		t.Errorf("kept %d bytes, want 800", len(got))
	}
}

// Past its Limit a buffer keeps the start and drops the rest, and still
// tells the writer it took every byte (a pipe's reader must not stop).
func TestLimitKeepsTheStart(t *testing.T) {
	b := Buffer{Limit: 4}
	for _, w := range []string{"abc", "de", "fgh"} {
		if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	if got := b.String(); got != "abcde" {
		t.Errorf("kept %q, want the writes up to the one that passed the limit (abcde)", got)
	}
}
