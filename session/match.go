package session

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// matcher finds a query in raw bytes, case-insensitively: rune by rune,
// under Unicode simple case folding (so "k" also finds "K" and the Kelvin
// sign). It does not scan the text byte by byte: it looks for the rarest
// rune of the query (each of its case variants, with the vectorised
// bytes.IndexByte/Index) and verifies the rest of the query backwards and
// forwards from there.
type matcher struct {
	q       []rune
	anchor  int      // index in q of the rune searched for
	needles [][]byte // UTF-8 encodings of every case variant of q[anchor]
	maxLen  int      // the most bytes a match can span
}

func newMatcher(query string) *matcher {
	m := &matcher{q: []rune(strings.ToValidUTF8(query, "\uFFFD"))}
	best := -1
	for i, r := range m.q {
		vs := variants(r)
		longest, cost := 0, 0
		for _, v := range vs {
			longest = max(longest, utf8.RuneLen(v))
			cost += commonness(v)
		}
		m.maxLen += longest
		if best < 0 || cost < best {
			best, m.anchor = cost, i
		}
	}
	for _, v := range variants(m.q[m.anchor]) {
		m.needles = append(m.needles, utf8.AppendRune(nil, v))
	}
	return m
}

// variants returns r and every rune it folds to (its simple case-folding
// orbit).
func variants(r rune) []rune {
	vs := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		vs = append(vs, f)
	}
	return vs
}

// commonRunes lists bytes roughly from most to least frequent in session
// JSONL (English prose, JSON punctuation, code); the anchor is the query
// rune whose variants are the least frequent overall.
const commonRunes = " e\"tao:insrlc,dhu.mp_f{}gy-b0w1v2k/3x45[]6789\\=qj()z;<>'#*+"

func commonness(r rune) int {
	switch {
	case r >= 'A' && r <= 'Z':
		return 8 // capitals are rarer than their lower case
	case r >= utf8.RuneSelf:
		return 4
	}
	if i := strings.IndexRune(commonRunes, r); i >= 0 {
		return 100 - i
	}
	return 2
}

// find returns the match in buf whose anchor comes first.
func (m *matcher) find(buf []byte) (start, end int, ok bool) {
	next := make([]int, len(m.needles))
	for i, n := range m.needles {
		next[i] = indexFrom(buf, n, 0)
	}
	for {
		k := -1
		for i, p := range next {
			if p >= 0 && (k < 0 || p < next[k]) {
				k = i
			}
		}
		if k < 0 {
			return 0, 0, false
		}
		p := next[k]
		if s, e, ok := m.verify(buf, p, len(m.needles[k])); ok {
			return s, e, true
		}
		next[k] = indexFrom(buf, m.needles[k], p+1)
	}
}

func indexFrom(buf, needle []byte, from int) int {
	var i int
	if len(needle) == 1 {
		i = bytes.IndexByte(buf[from:], needle[0])
	} else {
		i = bytes.Index(buf[from:], needle)
	}
	if i < 0 {
		return -1
	}
	return from + i
}

// verify checks the query around an anchor found at p (n bytes long).
func (m *matcher) verify(buf []byte, p, n int) (start, end int, ok bool) {
	end = p + n
	for _, want := range m.q[m.anchor+1:] {
		if end >= len(buf) {
			return 0, 0, false
		}
		r, size := rune(buf[end]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(buf[end:])
		}
		if invalid(r, size) || !foldEqual(r, want) {
			return 0, 0, false
		}
		end += size
	}
	start = p
	for j := m.anchor - 1; j >= 0; j-- {
		if start == 0 {
			return 0, 0, false
		}
		r, size := utf8.DecodeLastRune(buf[:start])
		if invalid(r, size) || !foldEqual(r, m.q[j]) {
			return 0, 0, false
		}
		start -= size
	}
	return start, end, true
}

// invalid reports a byte that is not UTF-8: it matches nothing (a query
// is made valid, its bad bytes becoming U+FFFD, which matches only itself).
func invalid(r rune, size int) bool { return r == utf8.RuneError && size == 1 }

func foldEqual(a, b rune) bool {
	if a == b {
		return true
	}
	if a < utf8.RuneSelf && b < utf8.RuneSelf {
		return lowerASCII(a) == lowerASCII(b)
	}
	for f := unicode.SimpleFold(a); f != a; f = unicode.SimpleFold(f) {
		if f == b {
			return true
		}
	}
	return false
}

func lowerASCII(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// searchChunk is how much of a file is read at a time.
const searchChunk = 256 << 10

// scanner searches one file after another with one reused buffer.
type scanner struct {
	m      *matcher
	radius int // snippet context, in runes either side
	buf    []byte
}

func newScanner(m *matcher, radius int) *scanner {
	ctx := utf8.UTFMax * radius
	return &scanner{m: m, radius: radius, buf: make([]byte, m.maxLen+ctx+searchChunk+ctx)}
}

// search reads r in chunks until the first match and returns its snippet.
// The bytes kept from one chunk to the next cover a match that straddles the
// boundary plus the context before it; after a match, reading goes on just
// far enough for the context after it. n counts the bytes read.
func (s *scanner) search(ctx context.Context, r io.Reader) (snippet string, found bool, n int64, err error) {
	contextBytes := utf8.UTFMax * s.radius
	carry := s.m.maxLen + contextBytes
	data := s.buf[:0]
	for {
		if err := ctx.Err(); err != nil {
			return "", false, n, err
		}
		k, rerr := io.ReadFull(r, s.buf[len(data):len(data)+searchChunk])
		n += int64(k)
		data = s.buf[:len(data)+k]
		eof := errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF)
		if rerr != nil && !eof {
			return "", false, n, rerr
		}
		if start, end, ok := s.m.find(data); ok {
			for !eof && len(data)-end < contextBytes {
				k, rerr := r.Read(s.buf[len(data):min(len(s.buf), end+contextBytes)])
				n += int64(k)
				data = s.buf[:len(data)+k]
				if rerr != nil {
					eof = true
				}
			}
			return makeSnippet(data, start, end, s.radius), true, n, nil
		}
		if eof {
			return "", false, n, nil
		}
		keep := min(len(data), carry)
		copy(s.buf, data[len(data)-keep:])
		data = s.buf[:keep]
	}
}

// makeSnippet cuts radius runes either side of data[start:end] and collapses
// every run of whitespace to one space.
func makeSnippet(data []byte, start, end, radius int) string {
	lo, hi := start, end
	for i := 0; i < radius && lo > 0; i++ {
		_, size := utf8.DecodeLastRune(data[:lo])
		lo -= size
	}
	for i := 0; i < radius && hi < len(data); i++ {
		_, size := utf8.DecodeRune(data[hi:])
		hi += size
	}
	var b strings.Builder
	space := false
	for _, r := range string(data[lo:hi]) { // invalid bytes become U+FFFD
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}
