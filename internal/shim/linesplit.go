package shim

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
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
//
// A reader with a chunkPool recycles its chunks instead: memory that the
// collector freed and the runtime handed back to the kernel came back as
// fresh pages, and the page faults of filling them were the largest part
// of what reading a streamed answer cost the shim. Each line then holds a
// reference to its chunk (retain), and the chunk goes back to the pool
// once the reader and every line have let go of it.
type lineReader struct {
	r    io.Reader
	max  int
	pool *chunkPool // nil: chunks are left to the collector
	cur  *chunk     // with a pool: the chunk buf is, referenced by the reader
	buf  []byte     // the chunk being read into
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

// newRecyclingLineReader is a lineReader that takes its chunks from pool
// and returns them there; a caller that keeps a line must retain its
// chunk.
func newRecyclingLineReader(r io.Reader, max int, pool *chunkPool) *lineReader {
	return &lineReader{r: r, max: max, pool: pool}
}

// next returns the next line or, for a line longer than max, a nil line
// and its length. It returns io.EOF after the last line. The line is the
// caller's to keep, read-only (its capacity ends with it); from a recycling
// reader, only while the caller holds its chunk (retain).
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

// retain returns the chunk holding the line next returned last, with a
// reference the caller must release; nil for a reader without a pool.
func (lr *lineReader) retain() *chunk {
	lr.cur.retain()
	return lr.cur
}

// fresh makes a chunk of size bytes the one being read into, holding rest
// (what is left of the chunk before); it lets go of that chunk.
func (lr *lineReader) fresh(size int, rest []byte) {
	var next *chunk
	var buf []byte
	if lr.pool != nil {
		next = lr.pool.get(size)
		buf = next.buf
	} else {
		buf = make([]byte, size)
	}
	copy(buf, rest)
	lr.cur.release()
	lr.cur, lr.buf, lr.start, lr.end, lr.scan, lr.longest = next, buf, 0, len(rest), 0, 0
}

// fill reads more into buf, after moving the unfinished line to a fresh
// chunk if buf has too little room left.
func (lr *lineReader) fill() {
	if len(lr.buf)-lr.end < minRead {
		pending := lr.end - lr.start
		scanned := lr.scan - lr.start
		lr.fresh(max(readChunk, min(8*lr.longest, maxChunk), 2*pending+minRead), lr.buf[lr.start:lr.end])
		lr.scan = scanned
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
			lr.fresh(max(readChunk, len(rest)+minRead), rest)
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

// chunk is a buffer stdout is read into, shared by the lines in it.
type chunk struct {
	buf  []byte
	refs atomic.Int32 // the reader's and the lines' references
	pool *chunkPool
}

// retain adds a reference; it does nothing on a nil chunk.
func (c *chunk) retain() {
	if c != nil {
		c.refs.Add(1)
	}
}

// release drops one reference; the last one returns c to its pool. It
// does nothing on a nil chunk.
func (c *chunk) release() {
	if c != nil && c.refs.Add(-1) == 0 {
		c.pool.put(c)
	}
}

// chunkPool keeps chunks of readChunk bytes for reuse (the larger ones,
// for long lines, are rare and left to the collector). A chunk is written
// only by the reader that gets it, and only once every line in it was
// released. The pool is a sync.Pool: what the stream needs at its peak
// (the lines in flight to a slow agent) is kept while it is used, and let
// go of after two collections without use.
type chunkPool struct{ free sync.Pool }

func newChunkPool() *chunkPool { return &chunkPool{} }

// get returns a chunk of size bytes holding one reference (the reader's).
func (p *chunkPool) get(size int) *chunk {
	var c *chunk
	if size == readChunk {
		c, _ = p.free.Get().(*chunk)
	}
	if c == nil {
		c = &chunk{buf: make([]byte, size), pool: p}
	}
	c.refs.Store(1)
	return c
}

func (p *chunkPool) put(c *chunk) {
	if len(c.buf) == readChunk {
		p.free.Put(c)
	}
}
