package shim

import (
	"bufio"
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
type lineReader struct {
	br  *bufio.Reader
	max int
	acc []byte
}

// readChunk is the read buffer size; lines up to this size cost one copy.
const readChunk = 64 << 10

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readChunk), max: max}
}

// next returns the next line (a fresh slice) or, for a line longer than
// max, a nil line and its length. It returns io.EOF after the last line.
func (lr *lineReader) next() (line []byte, overlong int64, err error) {
	// Fast path: the whole line is in the read buffer.
	chunk, err := lr.br.ReadSlice('\n')
	if err == nil {
		if line := trimEOL(chunk); len(line) <= lr.max {
			return bytes.Clone(line), 0, nil
		}
		return nil, int64(len(trimEOL(chunk))), nil
	}
	var total int64   // bytes of this line seen so far, terminator included
	var last2 [2]byte // the line's last two bytes so far, to size the terminator
	discarding := false
	lr.acc = lr.acc[:0]
	for {
		total += int64(len(chunk))
		switch len(chunk) {
		case 0:
		case 1:
			last2 = [2]byte{last2[1], chunk[0]}
		default:
			last2 = [2]byte{chunk[len(chunk)-2], chunk[len(chunk)-1]}
		}
		if !discarding {
			// +2 leaves room for the CR LF that trimEOL removes.
			if len(lr.acc)+len(chunk) > lr.max+2 {
				discarding = true
				lr.release()
			} else {
				lr.acc = append(lr.acc, chunk...)
			}
		}
		switch {
		case err == nil || (errors.Is(err, io.EOF) && total > 0):
			if !discarding {
				line := trimEOL(lr.acc)
				if len(line) <= lr.max {
					line = bytes.Clone(line)
					lr.release()
					return line, 0, nil
				}
			}
			lr.release()
			return nil, total - eolLen(last2, total), nil
		case errors.Is(err, bufio.ErrBufferFull):
			chunk, err = lr.br.ReadSlice('\n')
		default:
			lr.release()
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

// release drops a large accumulation buffer so one huge line does not pin
// max bytes for the worker's lifetime.
func (lr *lineReader) release() {
	if cap(lr.acc) > 4*readChunk {
		lr.acc = nil
	} else {
		lr.acc = lr.acc[:0]
	}
}

// trimEOL removes one trailing LF, then one trailing CR.
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}
