package session

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxLineBytes caps one line of a session file. A single entry can be
// large (a tool result with a whole file), but never this large in practice;
// the cap bounds the memory a reader may need.
const DefaultMaxLineBytes = 64 << 20

// readBufferSize is the bufio buffer of a line reader; longer lines are
// assembled in a separate, reused slice.
const readBufferSize = 64 << 10

// lineReader yields the complete (LF-terminated) lines of a file, with their
// numbers and byte offsets. An unterminated last line is pi still appending:
// it is never returned, and Torn reports it. Memory is bounded by the longest
// line read, and lines longer than max are consumed and reported as
// ErrLineTooLong without being buffered.
type lineReader struct {
	br   *bufio.Reader
	max  int
	off  int64 // offset of the next line
	line int   // number of the last line consumed
	long []byte
	torn bool
}

// bufferPool recycles the readers' buffers: listing 10,000 small files
// would otherwise allocate 640 MB of them.
var bufferPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}

// newLineReader reads r, which is positioned at offset, the start of line
// firstLine. Call release when done.
func newLineReader(r io.Reader, offset int64, firstLine, max int) *lineReader {
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	lr := &lineReader{br: bufferPool.Get().(*bufio.Reader), max: max}
	lr.reset(r, offset, firstLine)
	return lr
}

// reset makes the reader read src instead, positioned at offset, the start
// of line firstLine.
func (r *lineReader) reset(src io.Reader, offset int64, firstLine int) {
	r.br.Reset(src)
	r.off, r.line, r.torn = offset, firstLine-1, false
}

// release gives the buffer back; the reader is unusable afterwards.
func (r *lineReader) release() {
	r.br.Reset(nil)
	bufferPool.Put(r.br)
	r.br = nil
}

// errTooLong is returned by next for an over-long line; the line has been
// consumed and reading may go on.
var errTooLong = errors.New("line too long")

// next returns the next complete line without its LF (and without a CR
// before it), and the offset where it starts. The slice is valid until the
// next call. It returns io.EOF at the end of the complete lines.
func (r *lineReader) next() (line []byte, start int64, err error) {
	start = r.off
	r.long = r.long[:0]
	n := 0 // bytes of this line seen so far
	tooLong := false
	for {
		frag, err := r.br.ReadSlice('\n')
		n += len(frag)
		switch {
		case err == nil:
			r.line++
			r.off += int64(n)
			if tooLong || n-1 > r.max {
				return nil, start, errTooLong
			}
			b := frag
			if len(r.long) > 0 {
				r.long = append(r.long, frag...)
				b = r.long
			}
			b = b[:len(b)-1]
			if len(b) > 0 && b[len(b)-1] == '\r' {
				b = b[:len(b)-1]
			}
			return b, start, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if tooLong {
				continue
			}
			if n > r.max {
				tooLong = true
				r.long = r.long[:0]
				continue
			}
			r.long = append(r.long, frag...)
		case errors.Is(err, io.EOF):
			r.torn = n > 0
			return nil, start, io.EOF
		default:
			return nil, start, err
		}
	}
}

// tooLongError is the LineError for an over-long line.
func (r *lineReader) tooLongError(path string, start int64) *LineError {
	return &LineError{Path: path, Line: r.line, Offset: start,
		Err: fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, r.max)}
}

// readHeader reads the first line and decodes it as a header. It returns
// the offset just past the header line.
func readHeader(path string, r *lineReader) (Header, int64, error) {
	line, _, err := r.next()
	switch {
	case errors.Is(err, io.EOF):
		return Header{}, 0, &LineError{Path: path, Line: 1, Err: ErrNoHeader}
	case errors.Is(err, errTooLong):
		return Header{}, 0, r.tooLongError(path, 0)
	case err != nil:
		return Header{}, 0, fmt.Errorf("session: reading %s: %w", path, err)
	}
	h, err := parseHeader(line)
	if err != nil {
		return Header{}, 0, &LineError{Path: path, Line: 1, Err: err}
	}
	return h, r.off, nil
}
