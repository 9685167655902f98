package session

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
)

// Search defaults.
const (
	DefaultMaxHits       = 30
	DefaultMaxFileBytes  = 20 << 20
	DefaultSnippetRadius = 80
)

// SearchOptions tune Search. The zero value means the defaults.
type SearchOptions struct {
	// MaxHits caps the hits (default 30). There is at most one hit per
	// file.
	MaxHits int
	// MaxFileBytes skips larger files (default 20 MiB; negative: no
	// limit).
	MaxFileBytes int64
	// SnippetRadius is how many characters (runes) of context a snippet
	// keeps either side of the match (default 80).
	SnippetRadius int
	// Workers is how many files are searched at once (default GOMAXPROCS).
	Workers int
	// Cwd, when set, restricts the search to sessions started there.
	Cwd string
}

func (o SearchOptions) withDefaults() SearchOptions {
	if o.MaxHits <= 0 {
		o.MaxHits = DefaultMaxHits
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.SnippetRadius <= 0 {
		o.SnippetRadius = DefaultSnippetRadius
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	return o
}

// Hit is one element of a session_hits frame.
type Hit struct {
	SessionID string `json:"sessionId"`
	Path      string `json:"path"`
	Snippet   string `json:"snippet"`
}

// SearchResult is what a search found and what it passed over.
type SearchResult struct {
	// Hits are in the order of the sessions searched (newest first for a
	// listing); never nil.
	Hits []Hit
	// Files and Bytes count the files opened and the bytes read.
	Files int
	Bytes int64
	// TooLarge lists the files skipped for their size; Failed the files
	// that could not be read (removed since the listing, permissions).
	TooLarge []string
	Failed   []Skipped
}

// Search looks for query, case-insensitively, in the raw text (the JSONL as
// written) of each session file, in the order given, and returns a hit for
// each of the first MaxHits files that hold it, with a snippet around the
// first match. Matching folds case rune by rune (Unicode
// simple folding); snippets count runes, not UTF-16 units as the TypeScript
// agent does, and collapse every whitespace run to one space. Files are
// streamed in chunks, several at once, and the search stops as soon as the
// first MaxHits hits in order are known. When ctx ends it returns the hits
// of the files finished so far and ctx's error.
func Search(ctx context.Context, sessions []SessionInfo, query string, opts SearchOptions) (SearchResult, error) {
	if strings.TrimSpace(query) == "" {
		return SearchResult{Hits: []Hit{}}, ErrEmptyQuery
	}
	opts = opts.withDefaults()
	if opts.Cwd != "" {
		var in []SessionInfo
		for _, s := range sessions {
			if s.Cwd == opts.Cwd {
				in = append(in, s)
			}
		}
		sessions = in
	}
	m := newMatcher(query)

	type outcome struct {
		hit      *Hit
		bytes    int64
		opened   bool
		tooLarge bool
		err      error
	}
	results := make([]outcome, len(sessions))
	done := make(chan int, len(sessions))
	work, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	for range min(opts.Workers, len(sessions)) {
		wg.Go(func() {
			sc := newScanner(m, opts.SnippetRadius)
			for work.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(sessions) {
					return
				}
				o := &results[i]
				snippet, found, n, tooLarge, err := searchFile(work, sc, sessions[i].Path, opts.MaxFileBytes)
				o.bytes, o.tooLarge, o.err, o.opened = n, tooLarge, err, !tooLarge && err == nil
				if found {
					o.hit = &Hit{SessionID: sessions[i].SessionID, Path: sessions[i].Path, Snippet: snippet}
				}
				done <- i
			}
		})
	}
	// Collect in order: stop once the completed prefix holds MaxHits hits.
	completed := make([]bool, len(sessions))
	prefix, hits := 0, 0
	for received := 0; received < len(sessions) && hits < opts.MaxHits; received++ {
		var i int
		select {
		case i = <-done:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		completed[i] = true
		for prefix < len(sessions) && completed[prefix] {
			if results[prefix].hit != nil {
				hits++
			}
			prefix++
		}
	}
	stop()
	wg.Wait()

	res := SearchResult{Hits: []Hit{}}
	for i := range prefix {
		o := results[i]
		res.Bytes += o.bytes
		switch {
		case o.tooLarge:
			res.TooLarge = append(res.TooLarge, sessions[i].Path)
		case o.err != nil:
			res.Failed = append(res.Failed, Skipped{Path: sessions[i].Path, Err: o.err})
		default:
			res.Files++
		}
		if o.hit != nil && len(res.Hits) < opts.MaxHits {
			res.Hits = append(res.Hits, *o.hit)
		}
	}
	return res, ctx.Err()
}

func searchFile(ctx context.Context, sc *scanner, path string, maxBytes int64) (snippet string, found bool, n int64, tooLarge bool, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", false, 0, false, err
	}
	defer fh.Close()
	if maxBytes >= 0 {
		st, err := fh.Stat()
		if err != nil {
			return "", false, 0, false, err
		}
		if st.Size() > maxBytes {
			return "", false, 0, true, nil
		}
	}
	snippet, found, n, err = sc.search(ctx, fh)
	if err != nil {
		err = fmt.Errorf("session: searching %s: %w", path, err)
	}
	return snippet, found, n, false, err
}

// Search lists the root and searches the listing (newest first).
func (l *Lister) Search(ctx context.Context, query string, opts SearchOptions) (SearchResult, error) {
	if strings.TrimSpace(query) == "" {
		return SearchResult{Hits: []Hit{}}, ErrEmptyQuery
	}
	listing, err := l.List(ctx)
	if err != nil {
		return SearchResult{Hits: []Hit{}}, err
	}
	return Search(ctx, listing.Sessions, query, opts)
}
