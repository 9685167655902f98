package pirpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxLineBytes is the default cap on one record pi writes. pi's
// events can be large (agent_end and turn_end carry whole messages, tool
// results can hold big outputs), so the cap is generous; a longer record is
// skipped, never buffered whole.
const DefaultMaxLineBytes = 16 << 20

// LineTooLongError reports a record longer than the reader's cap. The
// record was skipped up to its terminating LF; reading can go on.
type LineTooLongError struct {
	// Bytes is the record's length without its LF (a trailing CR counts;
	// if the stream ended inside the record, the length read so far).
	Bytes int64
	// Max is the cap that was exceeded.
	Max int
}

func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("pirpc: record of %d bytes exceeds the %d byte cap; skipped", e.Bytes, e.Max)
}

// LineReader splits a byte stream into records exactly as pi does: on LF
// only (U+2028/U+2029 and lone CRs inside a record are data), with one
// trailing CR removed. Empty records are skipped. Memory is bounded by the
// cap: an overlong record is discarded while it is read.
type LineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// NewLineReader reads records of at most maxBytes from r (maxBytes <= 0
// means DefaultMaxLineBytes).
func NewLineReader(r io.Reader, maxBytes int) *LineReader {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxLineBytes
	}
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: maxBytes}
}

// Next returns the next non-empty record, without its LF and trailing CR.
// The returned slice is freshly allocated and owned by the caller.
//
// At the end of the stream Next returns io.EOF; an unterminated final
// record is returned first, as pi's own reader does. An overlong record
// yields a *LineTooLongError and the reader stays usable. Any other error
// comes from the underlying reader.
func (lr *LineReader) Next() ([]byte, error) {
	for {
		line, err := lr.readRecord()
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return nil, err
		}
		line = trimRecord(line)
		if len(line) > lr.max {
			return nil, &LineTooLongError{Bytes: int64(len(line)), Max: lr.max}
		}
		if len(line) > 0 {
			return line, nil
		}
	}
}

func trimRecord(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// readRecord reads up to and including the next LF. Records that fit the
// bufio buffer are copied once; longer ones are assembled in lr.buf.
func (lr *LineReader) readRecord() ([]byte, error) {
	lr.buf = lr.buf[:0]
	for {
		frag, err := lr.r.ReadSlice('\n')
		// +2: a trailing CR LF is not part of the payload; Next checks
		// the exact payload length.
		if len(lr.buf)+len(frag) > lr.max+2 {
			return nil, lr.skip(int64(len(lr.buf)+len(frag)), err)
		}
		if err == nil && len(lr.buf) == 0 {
			return bytes.Clone(frag), nil
		}
		lr.buf = append(lr.buf, frag...)
		switch {
		case err == nil:
			out := bytes.Clone(lr.buf)
			lr.shrink()
			return out, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			out := bytes.Clone(lr.buf)
			lr.shrink()
			return out, err
		}
	}
}

// skip discards the rest of an overlong record, seen bytes of which were
// read already.
func (lr *LineReader) skip(seen int64, err error) error {
	lr.buf = lr.buf[:0]
	lr.shrink()
	for errors.Is(err, bufio.ErrBufferFull) {
		var frag []byte
		frag, err = lr.r.ReadSlice('\n')
		seen += int64(len(frag))
	}
	tooLong := &LineTooLongError{Bytes: seen, Max: lr.max}
	switch {
	case err == nil:
		tooLong.Bytes-- // the LF
		return tooLong
	case errors.Is(err, io.EOF):
		// The stream ended inside the record; the next call sees EOF.
		return tooLong
	default:
		return errors.Join(tooLong, err)
	}
}

// shrink drops a large assembly buffer so that one huge record does not
// pin memory for the life of the worker.
func (lr *LineReader) shrink() {
	if cap(lr.buf) > 1<<20 {
		lr.buf = nil
	}
}

// appendLine appends b and the terminating LF, refusing a record that would
// be split by pi's reader.
func appendLine(dst, b []byte) ([]byte, error) {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	if bytes.IndexByte(b, '\n') >= 0 {
		return dst, ErrEmbeddedNewline
	}
	dst = append(dst, b...)
	return append(dst, '\n'), nil
}
