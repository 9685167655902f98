package shim

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type splitResult struct {
	line     string
	overlong int64
}

func splitAll(t testing.TB, r io.Reader, max int) []splitResult {
	lr := newLineReader(r, max)
	var out []splitResult
	for {
		line, overlong, err := lr.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		if line == nil && overlong == 0 {
			t.Fatal("nil line that is not overlong")
		}
		out = append(out, splitResult{string(line), overlong})
	}
}

// referenceSplit is the specification: split on LF, strip one CR from each
// line, a final unterminated line counts; lines longer than max are
// reported by length.
func referenceSplit(data []byte, max int) []splitResult {
	var out []splitResult
	for len(data) > 0 {
		line, rest, found := bytes.Cut(data, []byte{'\n'})
		data = rest
		if !found {
			data = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(line) > max {
			out = append(out, splitResult{"", int64(len(line))})
		} else {
			out = append(out, splitResult{string(line), 0})
		}
	}
	return out
}

func TestLineReader(t *testing.T) {
	long := strings.Repeat("z", 3*readChunk)
	cases := map[string]struct {
		in   string
		max  int
		want []splitResult
	}{
		"lf":                         {"a\nb\n", 10, []splitResult{{"a", 0}, {"b", 0}}},
		"crlf":                       {"a\r\nb\r\n", 10, []splitResult{{"a", 0}, {"b", 0}}},
		"one cr only":                {"a\r\r\n", 10, []splitResult{{"a\r", 0}}},
		"lone cr kept":               {"a\rb\n", 10, []splitResult{{"a\rb", 0}}},
		"u2028 is no eol":            {"x\u2028y\u2029z\n", 20, []splitResult{{"x\u2028y\u2029z", 0}}},
		"empty lines":                {"\n\n", 10, []splitResult{{"", 0}, {"", 0}}},
		"unterminated":               {"a\nrest", 10, []splitResult{{"a", 0}, {"rest", 0}}},
		"exactly max":                {"abcd\n", 4, []splitResult{{"abcd", 0}}},
		"max with crlf":              {"abcd\r\n", 4, []splitResult{{"abcd", 0}}},
		"overlong":                   {"abcde\nok\n", 4, []splitResult{{"", 5}, {"ok", 0}}},
		"overlong crlf":              {"abcde\r\nok\n", 4, []splitResult{{"", 5}, {"ok", 0}}},
		"long line kept":             {long + "\n", len(long), []splitResult{{long, 0}}},
		"long overlong":              {long + "\r\nnext\n", readChunk, []splitResult{{"", int64(len(long))}, {"next", 0}}},
		"long unterm":                {long, len(long), []splitResult{{long, 0}}},
		"long overlong unterminated": {long + "\r", 10, []splitResult{{"", int64(len(long))}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got := splitAll(t, r, tc.max)
				if !equalSplits(got, tc.want) {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

func equalSplits(a, b []splitResult) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzLineReader checks the splitter against the reference on arbitrary
// input, line caps and read sizes.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\r\nb\n\nc"), uint16(3), uint8(1))
	f.Add([]byte("\xe2\x80\xa8\r\r\n\n"), uint16(0), uint8(0))
	f.Add(append(bytes.Repeat([]byte("x"), 3000), "\r\nend"...), uint16(100), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, max uint16, chunk uint8) {
		var r io.Reader = bytes.NewReader(data)
		if chunk > 0 {
			r = &chunkReader{data: data, n: int(chunk)}
		}
		got := splitKept(t, r, int(max))
		want := referenceSplit(data, int(max))
		if !equalSplits(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		r = bytes.NewReader(data)
		if chunk > 0 {
			r = &chunkReader{data: data, n: int(chunk)}
		}
		if got := splitRecycled(t, r, int(max), int(chunk)%5); !equalSplits(got, want) {
			t.Fatalf("recycling: got %+v, want %+v", got, want)
		}
	})
}

// splitRecycled is splitAll with a recycling reader whose lines are each
// retained and read, then released, lag lines later: a chunk reused while
// a line in it was still retained shows as a difference.
func splitRecycled(t testing.TB, r io.Reader, max, lag int) []splitResult {
	type kept struct {
		line     []byte
		overlong int64
		c        *chunk
	}
	lr := newRecyclingLineReader(r, max, newChunkPool())
	var held []kept
	var out []splitResult
	let := func(k kept) {
		out = append(out, splitResult{string(k.line), k.overlong})
		k.c.release()
	}
	for {
		line, overlong, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		var c *chunk
		if overlong == 0 {
			c = lr.retain()
		}
		held = append(held, kept{line, overlong, c})
		if len(held) > lag {
			let(held[0])
			held = held[1:]
		}
	}
	for _, k := range held {
		let(k)
	}
	return out
}

// A recycling reader whose lines are released reads into the same few
// chunks (their pages stay mapped) instead of a fresh one each time, and
// never into one that holds a line still retained.
func TestLineReaderRecyclesChunks(t *testing.T) {
	line := append(bytes.Repeat([]byte("u"), 999), '\n')
	data := bytes.Repeat(line, 2000) // 2 MB: 31 chunks of 64 KiB without reuse
	lr := newRecyclingLineReader(bytes.NewReader(data), DefaultMaxLine, newChunkPool())
	chunks := map[*chunk]bool{}
	var held *chunk
	for i := 0; ; i++ {
		got, _, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, line[:999]) {
			t.Fatalf("line %d is %.20q…", i, got)
		}
		c := lr.retain()
		chunks[c] = true
		if i == 10 {
			held = c // retained throughout: its chunk must never be reused
			continue
		}
		c.release()
	}
	if !bytes.Equal(held.buf[10*1000:11*1000-1], line[:999]) {
		t.Fatal("a retained line's chunk was read into again")
	}
	// Without reuse it takes 31 chunks; with it, 2 or 3. A sync.Pool may
	// drop what it holds at any time (a collection; a quarter of the puts
	// under the race detector), hence the margin.
	if len(chunks) > 20 {
		t.Fatalf("read into %d chunks, want a few", len(chunks))
	}
}

// splitKept is splitAll that keeps the lines as returned (slices of the
// reader's chunks) and reads them only at the end: a line the reader
// wrote over after returning it, or that appending to an earlier line
// changed, shows as a difference.
func splitKept(t testing.TB, r io.Reader, max int) []splitResult {
	lr := newLineReader(r, max)
	var lines [][]byte
	var overlongs []int64
	for {
		line, overlong, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		if line == nil && overlong == 0 {
			t.Fatal("nil line that is not overlong")
		}
		_ = append(line, '#') // a line's capacity ends with it
		lines, overlongs = append(lines, line), append(overlongs, overlong)
	}
	out := make([]splitResult, len(lines))
	for i := range lines {
		out[i] = splitResult{string(lines[i]), overlongs[i]}
	}
	return out
}

// Lines returned earlier keep their bytes while the reader goes on, across
// chunks, long lines and overlong ones.
func TestLineReaderLinesStayIntact(t *testing.T) {
	var data []byte
	for i := range 3000 {
		data = append(data, bytes.Repeat([]byte{byte('a' + i%26)}, i*37%5000)...)
		data = append(data, "\r\n"[:1+i%2]...)
		if i%2 == 0 {
			data = append(data[:len(data)-1], '\n')
		}
	}
	data = append(data, bytes.Repeat([]byte("w"), 3*readChunk)...)
	data = append(data, "\nend"...)
	for _, r := range []io.Reader{bytes.NewReader(data), &chunkReader{data: data, n: 1000}} {
		if got, want := splitKept(t, r, 100_000), referenceSplit(data, 100_000); !equalSplits(got, want) {
			t.Fatalf("%d lines, want %d; or a line differs", len(got), len(want))
		}
	}
}

type chunkReader struct {
	data []byte
	n    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.data)
	c.data = c.data[n:]
	return n, nil
}

func BenchmarkLineReader(b *testing.B) {
	line := `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"hello"}}` + "\n"
	data := bytes.Repeat([]byte(line), 10000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		lr := newLineReader(bytes.NewReader(data), DefaultMaxLine)
		for {
			if _, _, err := lr.next(); err != nil {
				break
			}
		}
	}
}
