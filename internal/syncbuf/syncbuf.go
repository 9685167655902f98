// Package syncbuf is a byte buffer that goroutines may share: the output
// of a child process, written by the goroutine that reads its pipe while
// a test reads what has come so far.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer behind a mutex. Its zero value is empty and
// ready to use; it must not be copied after first use.
type Buffer struct {
	// Limit, when positive, is how many bytes it keeps: what is written
	// once that many are held is dropped (the start of a process's output
	// is what explains its failure), though Write still reports it taken.
	Limit int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p (or drops it, past the Limit); it never fails.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Limit > 0 && s.b.Len() > s.Limit {
		return len(p), nil
	}
	return s.b.Write(p)
}

// String is everything kept so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
