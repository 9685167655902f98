package fsservice

import (
	"context"
	"encoding/base64"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"example.com/pifleet/transport"
)

// referencePage is the reference's algorithm written the obvious way: the
// whole text decoded, split on LF, sliced, joined, then cut at maxBytes on
// a rune boundary. readPage must agree with it on every input.
func referencePage(data []byte, offset, limit, maxBytes int) (string, bool) {
	var b strings.Builder
	for len(data) > 0 {
		r, w := utf8.DecodeRune(data)
		b.WriteRune(r)
		data = data[w:]
	}
	lines := strings.Split(b.String(), "\n")
	start, end := min(offset, len(lines)), min(offset+limit, len(lines))
	truncated := offset+limit < len(lines)
	text, cut := cutUTF8([]byte(strings.Join(lines[start:end], "\n")), maxBytes)
	return text, truncated || cut
}

func TestReadPageSemantics(t *testing.T) {
	cases := []struct {
		data          string
		offset, limit int
		text          string
		truncated     bool
	}{
		{"", 0, 2000, "", false},
		{"a", 0, 2000, "a", false},
		{"a\n", 0, 2000, "a\n", false},                  // the empty last line is part of the page
		{"a\n", 0, 1, "a", true},                        // … and remains after a one-line page
		{"a\nb", 1, 1, "b", false},                      // last line without LF
		{"a\nb", 2, 5, "", false},                       // past the end
		{"a\nb\n", 2, 5, "", false},                     // exactly at the empty last line
		{"a\nb\n", 3, 5, "", false},                     // past it
		{"a\nb\nc", 0, 0, "", true},                     // limit 0: nothing, lines remain
		{"a\r\nb\r\n", 0, 2, "a\r\nb\r", true},          // CR stays, only LF splits
		{"x\xffy", 0, 1, "x\uFFFDy", false},             // invalid byte → U+FFFD
		{"\u2028a\u2029", 0, 1, "\u2028a\u2029", false}, // U+2028 is not a line break
	}
	for _, c := range cases {
		text, truncated, err := readPage(bg, strings.NewReader(c.data), c.offset, c.limit, MaxPageBytes, DefaultReadLimit)
		if err != nil || text != c.text || truncated != c.truncated {
			t.Errorf("readPage(%q, %d, %d) = %q, %v, %v; want %q, %v", c.data, c.offset, c.limit, text, truncated, err, c.text, c.truncated)
		}
		if rt, rtr := referencePage([]byte(c.data), c.offset, c.limit, MaxPageBytes); rt != c.text || rtr != c.truncated {
			t.Errorf("referencePage(%q) = %q, %v disagrees with the table", c.data, rt, rtr)
		}
	}
}

func FuzzReadPage(f *testing.F) {
	f.Add([]byte("line1\nline2\nline3\n"), 1, 1, 64)
	f.Add([]byte("é\xff\xe2\x82\n\n"), 0, 3, 5)
	f.Add([]byte(strings.Repeat("ab\n", 50)), 7, 10, 13)
	f.Fuzz(func(t *testing.T, data []byte, offset, limit, maxBytes int) {
		offset, limit, maxBytes = abs(offset)%64, abs(limit)%64, abs(maxBytes)%128
		text, truncated, err := readPage(bg, oneByteAtATime(data), offset, limit, maxBytes, DefaultReadLimit)
		if err != nil {
			t.Fatal(err)
		}
		want, wantTr := referencePage(data, offset, limit, maxBytes)
		if text != want || truncated != wantTr {
			t.Fatalf("readPage(%q, %d, %d, %d) = %q %v, reference %q %v", data, offset, limit, maxBytes, text, truncated, want, wantTr)
		}
		if !utf8.ValidString(text) || len(text) > maxBytes {
			t.Fatalf("page %q: invalid UTF-8 or over %d bytes", text, maxBytes)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if n == math.MinInt {
			return 0
		}
		return -n
	}
	return n
}

// oneByteAtATime returns a reader that hands out at most one byte per Read, so
// that runes and lines straddle every buffer boundary.
func oneByteAtATime(data []byte) io.Reader { return &oneByteReader{data: data} }

type oneByteReader struct{ data []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.data[0]
	r.data = r.data[1:]
	return 1, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// endless yields the byte b forever.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// A page of an unbounded single-line stream reads only the page and one
// buffer: the file is never read whole.
func TestReadPageStopsEarly(t *testing.T) {
	cr := &countingReader{r: endless('x')}
	text, truncated, err := readPage(bg, cr, 0, MaxPageLines, MaxPageBytes, DefaultReadLimit)
	if err != nil || len(text) != MaxPageBytes || !truncated {
		t.Fatalf("page: %d bytes truncated=%v err=%v", len(text), truncated, err)
	}
	if limit := int64(MaxPageBytes + 64<<10); cr.n > limit {
		t.Errorf("read %d bytes for a %d-byte page, want at most %d", cr.n, MaxPageBytes, limit)
	}
}

// Skipping to an offset stops at the read limit with errReadLimit, having
// read no more than the limit.
func TestReadPageReadLimit(t *testing.T) {
	cr := &countingReader{r: endless('\x00')}
	_, _, err := readPage(bg, cr, 5, 10, MaxPageBytes, 1<<20)
	if err != errReadLimit {
		t.Fatalf("err = %v, want errReadLimit", err)
	}
	if cr.n > 1<<20 {
		t.Errorf("read %d bytes, limit is %d", cr.n, 1<<20)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, _, err := readPage(ctx, endless('\n'), math.MaxInt32, 1, MaxPageBytes, math.MaxInt64); err != context.Canceled {
		t.Errorf("canceled skip: err = %v, want context.Canceled", err)
	}
}

// A 100 MiB sparse file: a first page comes back at once; a page beyond
// the read limit is refused as too_large.
func TestReadHugeFile(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := New(dir, WithReadLimit(4<<20))
	res := s.Read(bg, &transport.FsReadFrame{Path: "huge.log", Limit: num(10)})
	if got := textOf(t, res); len(got) != MaxPageBytes || !res.Truncated {
		t.Errorf("first page: %d bytes truncated=%v, want %d true", len(got), res.Truncated, MaxPageBytes)
	}
	res = s.Read(bg, &transport.FsReadFrame{Path: "huge.log", Offset: num(1)})
	wantCode(t, res, CodeTooLarge)
	if !strings.Contains(res.Error.Message, "104857600 bytes") {
		t.Errorf("message %q does not name the file's size", res.Error.Message)
	}
}

func TestReadUTF8Cut(t *testing.T) {
	dir := t.TempDir()
	// One ASCII byte, then 2-byte runes: byte 51,200 is the first half of
	// a rune, so the cut must fall one byte earlier.
	writeFile(t, dir, "e.txt", []byte("a"+strings.Repeat("é", MaxPageBytes)))
	res := New(dir).Read(bg, &transport.FsReadFrame{Path: "e.txt"})
	got := textOf(t, res)
	if !utf8.ValidString(got) || len(got) != MaxPageBytes-1 || !res.Truncated {
		t.Errorf("cut page: %d bytes valid=%v truncated=%v, want %d true true", len(got), utf8.ValidString(got), res.Truncated, MaxPageBytes-1)
	}
}

func TestReadErrors(t *testing.T) {
	dir, _ := fixture(t)
	writeFile(t, dir, "big.PNG", nil)
	if err := os.Truncate(filepath.Join(dir, "big.PNG"), MaxImageBytes+1); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(dir)
	wantCode(t, s.Read(bg, &transport.FsReadFrame{Path: "missing.txt"}), CodeNotFound)
	wantCode(t, s.Read(bg, &transport.FsReadFrame{Path: "src"}), CodeNotAFile)
	wantCode(t, s.Read(bg, &transport.FsReadFrame{Path: "pipe"}), CodeNotAFile) // and does not block
	res := s.Read(bg, &transport.FsReadFrame{Path: "big.PNG"})
	wantCode(t, res, CodeTooLarge)
	if !strings.Contains(res.Error.Message, "716801 bytes") {
		t.Errorf("too_large message %q does not name the size", res.Error.Message)
	}
}

func TestReadImageExtensions(t *testing.T) {
	dir := t.TempDir()
	want := map[string]string{
		"a.PNG": "image/png", "b.jpg": "image/jpeg", "c.JpEg": "image/jpeg",
		"d.gif": "image/gif", "e.webp": "image/webp",
	}
	for name := range want {
		writeFile(t, dir, name, []byte("\x89bytes"))
	}
	writeFile(t, dir, "f.svg", []byte("<svg/>"))
	s := New(dir)
	for name, mime := range want {
		res := s.Read(bg, &transport.FsReadFrame{Path: name})
		if codeOf(res) != "" || res.Mime != mime || res.Base64 != base64.StdEncoding.EncodeToString([]byte("\x89bytes")) {
			t.Errorf("%s: %+v, want mime %s and base64", name, res, mime)
		}
	}
	if got := textOf(t, s.Read(bg, &transport.FsReadFrame{Path: "f.svg"})); got != "<svg/>" {
		t.Errorf("svg is text: got %q", got)
	}
}

func TestPageBound(t *testing.T) {
	cases := []struct {
		v    *float64
		want int
	}{
		{nil, 7}, {num(0), 0}, {num(-3), 0}, {num(2.9), 2}, {num(-0.5), 0},
		{num(1e300), math.MaxInt32}, {num(math.Inf(1)), math.MaxInt32},
	}
	for _, c := range cases {
		if got := pageBound(c.v, 7); got != c.want {
			t.Errorf("pageBound(%v) = %d, want %d", c.v, got, c.want)
		}
	}
	// Negative offset is clamped to 0; a huge limit still yields one page.
	dir, _ := fixture(t)
	res := New(dir).Read(bg, &transport.FsReadFrame{Path: "hello.txt", Offset: num(-4), Limit: num(1e9)})
	if got := textOf(t, res); got != "line1\nline2\nline3\n" {
		t.Errorf("negative offset, huge limit = %q", got)
	}
}
