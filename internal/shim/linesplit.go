package shim

import (
	"bytes"
	"errors"
	"io"
)

// lineReader splits a worker's stdout into lines the way pi's own reader
// does: on LF only (never on U+2028/U+2029, which are legal inside JSON
// strings), with one trailing CR stripped. A final line without LF is still
// a line. A line longer than max is never held whole: once it outgrows max
// the reader only counts it, and reports its length instead of its bytes,
// so memory stays bounded whatever the worker prints.
//
// The lines it returns are slices of the chunk the pipe was read into, not
// copies: a streamed answer is one line per update, and copying each out
// of a read buffer (an allocation, and the bytes moved once more) was the
// shim's largest cost per line after the syscalls. A chunk is never
// written again where it holds a line handed out: when it is used up, the
// unfinished line moves to a fresh chunk, and the old one is collected
// once its lines are (acknowledged and dropped from the backlog).
type lineReader struct {
	r   io.Reader
	max int
	buf []byte // the chunk being read into
	// buf[start:end] is read and not yet returned; buf[start:scan] holds
	// no LF.
	start, end, scan int
	err              error // the read error, returned once buf is used up
	longest          int   // the longest line returned from this chunk
	scratch          []byte
}

const (
	// readChunk is the smallest chunk; lines are usually far shorter.
	readChunk = 64 << 10
	// maxChunk bounds the chunk sized for long lines (8 of the longest
	// line of the previous chunk), so that the part of a line carried over
	// to the next chunk stays a small share of what is read.
	maxChunk = 512 << 10
	// minRead is the least room a read gets: less, and a fresh chunk is
	// taken first.
	minRead = 4 << 10
)

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: r, max: max}
}

// next returns the next line or, for a line longer than max, a nil line
// and its length. It returns io.EOF after the last line. The line is the
// caller's to keep, read-only (its capacity ends with it).
func (lr *lineReader) next() (line []byte, overlong int64, err error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.scan:lr.end], '\n'); i >= 0 {
			raw := lr.buf[lr.start : lr.scan+i+1]
			lr.start = lr.scan + i + 1
			lr.scan = lr.start
			return lr.line(raw)
		}
		lr.scan = lr.end
		if lr.err != nil {
			if lr.start < lr.end && errors.Is(lr.err, io.EOF) {
				raw := lr.buf[lr.start:lr.end]
				lr.start, lr.scan = lr.end, lr.end
				return lr.line(raw)
			}
			lr.start, lr.scan = lr.end, lr.end
			return nil, 0, lr.err
		}
		// +2 leaves room for the CR LF that trimEOL removes.
		if lr.end-lr.start > lr.max+2 {
			return lr.discard()
		}
		lr.fill()
	}
}

// line returns a whole line, its terminator included in raw.
func (lr *lineReader) line(raw []byte) ([]byte, int64, error) {
	line := trimEOL(raw)
	if len(line) > lr.max {
		return nil, int64(len(line)), nil
	}
	lr.longest = max(lr.longest, len(line))
	return line[:len(line):len(line)], 0, nil
}

// fill reads more into buf, after moving the unfinished line to a fresh
// chunk if buf has too little room left.
func (lr *lineReader) fill() {
	if len(lr.buf)-lr.end < minRead {
		pending := lr.end - lr.start
		size := max(readChunk, min(8*lr.longest, maxChunk), 2*pending+minRead)
		fresh := make([]byte, size)
		copy(fresh, lr.buf[lr.start:lr.end])
		lr.scan -= lr.start
		lr.buf, lr.start, lr.end, lr.longest = fresh, 0, pending, 0
	}
	n, err := lr.r.Read(lr.buf[lr.end:])
	lr.end += n
	if err != nil {
		lr.err = err
	}
}

// discard reads the rest of an overlong line without keeping it, and
// returns its length.
func (lr *lineReader) discard() ([]byte, int64, error) {
	total := int64(lr.end - lr.start) // terminator included, once found
	last2 := [2]byte{lr.buf[lr.end-2], lr.buf[lr.end-1]}
	lr.start, lr.scan = lr.end, lr.end
	if lr.scratch == nil {
		lr.scratch = make([]byte, readChunk)
	}
	for {
		n, err := lr.r.Read(lr.scratch)
		chunk := lr.scratch[:n]
		i := bytes.IndexByte(chunk, '\n')
		if i >= 0 {
			chunk = chunk[:i+1]
		}
		total += int64(len(chunk))
		switch len(chunk) {
		case 0:
		case 1:
			last2 = [2]byte{last2[1], chunk[0]}
		default:
			last2 = [2]byte{chunk[len(chunk)-2], chunk[len(chunk)-1]}
		}
		if i >= 0 {
			// What follows the line starts the next one, in a chunk of its
			// own (buf may hold lines handed out).
			rest := lr.scratch[i+1 : n]
			fresh := make([]byte, max(readChunk, len(rest)+minRead))
			copy(fresh, rest)
			lr.buf = fresh
			lr.start, lr.end, lr.scan, lr.longest = 0, len(rest), 0, 0
			lr.err = err
			return nil, total - eolLen(last2, total), nil
		}
		if err != nil {
			lr.err = err
			if errors.Is(err, io.EOF) {
				return nil, total - eolLen(last2, total), nil
			}
			return nil, 0, err
		}
	}
}

// eolLen is how many of a line's last bytes trimEOL would remove, given
// its last two bytes and its length.
func eolLen(last2 [2]byte, n int64) int64 {
	switch {
	case last2[1] == '\n' && n >= 2 && last2[0] == '\r':
		return 2
	case last2[1] == '\n' || last2[1] == '\r':
		return 1
	}
	return 0
}

// trimEOL removes one trailing LF, then one trailing CR.
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}
