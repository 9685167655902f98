package fsservice

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"example.com/pifleet/transport"
)

// imageMimes maps the image extensions of reference 1.16 (matched
// case-insensitively) to their MIME types.
var imageMimes = map[string]string{
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
}

func (s *Service) read(ctx context.Context, req *transport.FsReadFrame, res *transport.FsResultFrame) error {
	t, err := s.resolve(req.Path)
	if err != nil {
		return err
	}
	root, err := t.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	// Stat before opening: opening a FIFO would block until a writer came.
	fi, err := root.Stat(t.rel)
	if err != nil {
		return osError(err, t.shown)
	}
	if !fi.Mode().IsRegular() {
		return errorf(CodeNotAFile, "not a file: %s", t.shown)
	}
	// O_NONBLOCK keeps a FIFO swapped in after the Stat from blocking the
	// open; regular files ignore it. The fstat below catches the swap.
	f, err := root.OpenFile(t.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return osError(err, t.shown)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return osError(err, t.shown)
	}
	if !fi.Mode().IsRegular() {
		return errorf(CodeNotAFile, "not a file: %s", t.shown)
	}

	if mime, ok := imageMimes[strings.ToLower(filepath.Ext(t.rel))]; ok {
		return readImage(f, fi.Size(), mime, t.shown, res)
	}
	offset, limit := pageBound(req.Offset, 0), min(pageBound(req.Limit, MaxPageLines), MaxPageLines)
	text, truncated, err := readPage(ctx, f, offset, limit, MaxPageBytes, s.readLimit)
	if err != nil {
		if errors.Is(err, errReadLimit) {
			return errorf(CodeTooLarge, "the page at line %d is not within the first %d bytes of %s (%d bytes)", offset, s.readLimit, t.shown, fi.Size())
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return errorf(CodeCanceled, "fs_read canceled: %v", ctxErr)
		}
		return osError(err, t.shown)
	}
	res.Text, res.Truncated = &text, truncated
	return nil
}

// readImage answers an image: base64 and MIME type, or too_large.
func readImage(f *os.File, size int64, mime, shown string, res *transport.FsResultFrame) error {
	if size > MaxImageBytes {
		return errorf(CodeTooLarge, "image too large: %d bytes (max %d): %s", size, MaxImageBytes, shown)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxImageBytes+1))
	if err != nil {
		return osError(err, shown)
	}
	if len(data) > MaxImageBytes { // it grew since the stat
		return errorf(CodeTooLarge, "image too large: more than %d bytes: %s", MaxImageBytes, shown)
	}
	res.Base64, res.Mime = base64.StdEncoding.EncodeToString(data), mime
	return nil
}

// pageBound turns an optional wire number into a line count the way
// JavaScript's Array.prototype.slice does: absent → def, fractions
// truncated toward zero, negative → 0, huge → MaxInt.
func pageBound(v *float64, def int) int {
	if v == nil {
		return def
	}
	f := math.Trunc(*v)
	switch {
	case f <= 0 || math.IsNaN(f):
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	}
	return int(f)
}

// errReadLimit says a page could not be reached within the read limit.
var errReadLimit = errors.New("fsservice: read limit reached")

// limitReader reads at most n bytes, then fails with errReadLimit (not
// io.EOF, so that "the file ended" and "we stopped reading" differ).
type limitReader struct {
	r io.Reader
	n int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errReadLimit
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// readPage returns lines [offset, offset+limit) of r joined by LF, the way
// the reference splits a file: on LF only, so n LFs make n+1 lines, the
// last possibly empty, and CRs stay. truncated is true when lines remain
// after the page, or when the page was cut at maxBytes.
//
// It streams: skipped lines are never held, reading stops as soon as the
// page is complete or full, and at most readLimit bytes are read in all
// (errReadLimit when the page needs more). The cut at maxBytes lands on a
// rune boundary; each byte that is not valid UTF-8 becomes U+FFFD.
func readPage(ctx context.Context, r io.Reader, offset, limit, maxBytes int, readLimit int64) (text string, truncated bool, err error) {
	br := bufio.NewReaderSize(&limitReader{r: r, n: readLimit}, 32<<10)
	for skipped, calls := 0, 0; skipped < offset; calls++ {
		if calls%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return "", false, err
			}
		}
		switch _, err := br.ReadSlice('\n'); err {
		case nil:
			skipped++
		case bufio.ErrBufferFull: // a long line: keep skipping it
		case io.EOF: // the offset lies past the last line
			return "", false, nil
		default:
			return "", false, err
		}
	}
	out := make([]byte, 0, min(maxBytes, 8<<10))
	for line := 0; line < limit; line++ {
		if line > 0 {
			if len(out)+1 > maxBytes {
				return string(out), true, nil
			}
			out = append(out, '\n')
		}
		var end lineEnd
		if out, end, err = appendLine(br, out, maxBytes); err != nil {
			return "", false, err
		}
		switch end {
		case endOfFile: // this line is the file's last
			return string(out), false, nil
		case pageFull:
			return string(out), true, nil
		}
	}
	// The page's last line ended with LF, so at least one more line (an
	// empty one at least) follows it.
	return string(out), true, nil
}

// lineEnd says why appendLine stopped.
type lineEnd uint8

const (
	endOfLine lineEnd = iota // an LF ended the line (and was consumed)
	endOfFile                // the file ended
	pageFull                 // the next character would pass maxBytes
)

// appendLine appends the rest of the current line to out as valid UTF-8
// (each invalid byte becomes U+FFFD), never letting out exceed maxBytes.
// It works on the reader's buffer directly; only a rune split across two
// buffer fills goes through ReadRune.
func appendLine(br *bufio.Reader, out []byte, maxBytes int) ([]byte, lineEnd, error) {
	for {
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err == io.EOF {
				return out, endOfFile, nil
			} else if err != nil {
				return out, 0, err
			}
		}
		buf, _ := br.Peek(br.Buffered())
		i := 0
		for i < len(buf) {
			c := buf[i]
			if c == '\n' {
				br.Discard(i + 1)
				return out, endOfLine, nil
			}
			if c < utf8.RuneSelf {
				if len(out)+1 > maxBytes {
					br.Discard(i)
					return out, pageFull, nil
				}
				out = append(out, c)
				i++
				continue
			}
			if !utf8.FullRune(buf[i:]) {
				break // the rest of this rune is not buffered yet
			}
			r, w := utf8.DecodeRune(buf[i:]) // an invalid byte: RuneError, width 1
			if len(out)+utf8.RuneLen(r) > maxBytes {
				br.Discard(i)
				return out, pageFull, nil
			}
			out = utf8.AppendRune(out, r)
			i += w
		}
		br.Discard(i)
		if i == len(buf) {
			continue
		}
		// A rune split across buffer fills: ReadRune refills and decodes
		// it (an incomplete sequence at the end of the file is RuneError).
		r, _, err := br.ReadRune()
		if err != nil {
			return out, 0, err
		}
		if len(out)+utf8.RuneLen(r) > maxBytes {
			br.UnreadRune()
			return out, pageFull, nil
		}
		out = utf8.AppendRune(out, r)
	}
}
