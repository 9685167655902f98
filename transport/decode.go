package transport

import (
	"bytes"
	"io"
	"strconv"
	"sync"

	"example.com/pifleet/internal/jsonscan"
)

// Buffer sizes. A decoder reads into a small buffer of its own while its
// stream trickles (heartbeats, a request now and then) and takes a
// readChunk buffer from a pool shared by every decoder while it streams,
// handing it back once it has consumed what it read and the stream
// trickles again: ten thousand idle connections hold no large buffers.
const (
	// readChunk is the read size of a streaming decoder.
	readChunk = 64 << 10
	// idleChunk is the read size of a trickling one.
	idleChunk = 1 << 10
)

// chunkPool holds readChunk buffers between streams.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// Decoder reads frames from a JSONL stream: records end at LF (and only
// LF: U+2028/U+2029 are ordinary characters), one trailing CR is removed,
// empty records are skipped.
//
// Decode returns either a frame that passed every check or an error.
// A *ProtocolError concerns one record only: the record is dropped and the
// next Decode goes on with the following one. Any other error comes from
// the reader and is final (io.EOF at a clean end of stream,
// io.ErrUnexpectedEOF when the stream ends inside a record).
//
// Memory is bounded: the decoder never holds more than MaxFrameBytes+1
// bytes of one record. A longer record yields exactly one
// CodeFrameTooLarge error as soon as the limit is passed; the rest of it,
// up to and including its LF, is skipped as it arrives.
type Decoder struct {
	r          io.Reader
	buf        []byte // small, pooled (a readChunk from chunkPool) or grown
	start, end int    // unconsumed bytes are buf[start:end]
	scan       int    // buf[start:scan] is known to hold no LF
	discarding bool
	err        error
	s          schema

	small  []byte  // the decoder's own idleChunk buffer
	pooled *[]byte // buf's chunkPool entry while buf is one
	// streaming is set while reads come back large: the large buffer is
	// kept between records then.
	streaming bool
}

// NewDecoder returns a Decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	d := &Decoder{r: r, small: make([]byte, idleChunk)}
	d.buf = d.small
	return d
}

// Decode returns the next frame; see Decoder for the error contract.
func (d *Decoder) Decode() (Frame, error) {
	rec, err := d.ReadRecord()
	if err != nil {
		return nil, err
	}
	if bytes.Equal(rec, heartbeatRecord) {
		// The heartbeat as this package and the TypeScript peer write
		// it, every 15 s on every connection: known without parsing.
		return new(HeartbeatFrame), nil
	}
	f, perr := d.s.parseFrame(rec)
	if perr != nil {
		return nil, perr
	}
	return f, nil
}

// ReadRecord returns the next non-empty record without its LF and trailing
// CR, without parsing it: framing only. The slice is valid until the next
// call. Its errors follow the same contract as Decode's (a too-large
// record is a *ProtocolError).
func (d *Decoder) ReadRecord() ([]byte, error) {
	idle := 0
	for {
		if i := bytes.IndexByte(d.buf[d.scan:d.end], '\n'); i >= 0 {
			lf := d.scan + i
			rec := d.buf[d.start:lf]
			d.start, d.scan = lf+1, lf+1
			if d.discarding {
				d.discarding = false
				continue
			}
			if len(rec) > MaxFrameBytes {
				return nil, errFrameTooLarge(len(rec))
			}
			if n := len(rec); n > 0 && rec[n-1] == '\r' {
				rec = rec[:n-1]
			}
			if len(rec) == 0 {
				continue
			}
			return rec, nil
		}
		d.scan = d.end
		switch {
		case d.discarding:
			d.start, d.scan, d.end = 0, 0, 0
		case d.end-d.start > MaxFrameBytes:
			n := d.end - d.start
			d.discarding = true
			d.start, d.scan, d.end = 0, 0, 0
			return nil, errFrameTooLarge(n)
		}
		if d.err != nil {
			if d.err == io.EOF && d.end > d.start && !d.discarding {
				d.start = d.end
				return nil, io.ErrUnexpectedEOF
			}
			return nil, d.err
		}
		d.makeRoom()
		n, err := d.r.Read(d.buf[d.end:])
		d.end += n
		if err != nil {
			d.err = err
		}
		d.streaming = n >= idleChunk/2
		if n == 0 && err == nil {
			if idle++; idle > 100 {
				d.err = io.ErrNoProgress
			}
		}
	}
}

// makeRoom readies buf for the next read: back to the small buffer when
// everything read is consumed and the stream trickles, onto a large one
// when the small one is full or the stream flows, compacted or grown when
// a partial record fills it.
func (d *Decoder) makeRoom() {
	if d.start == d.end {
		d.start, d.scan, d.end = 0, 0, 0
		if !d.streaming {
			d.use(d.small)
			return
		}
		if len(d.buf) > readChunk {
			d.use(nil) // a grown buffer is not kept between records
		}
	}
	if len(d.buf) < readChunk && (d.streaming || d.end == len(d.buf)) {
		d.use(nil)
		return
	}
	if d.end < len(d.buf) {
		return
	}
	if d.start > 0 {
		n := copy(d.buf, d.buf[d.start:d.end])
		d.scan -= d.start
		d.start, d.end = 0, n
		return
	}
	// A partial record fills the buffer: grow it, never past one byte
	// more than the limit (enough to see it is over).
	grown := make([]byte, min(2*len(d.buf), MaxFrameBytes+1))
	copy(grown, d.buf[:d.end])
	d.swap(grown, nil)
}

// use moves the unconsumed bytes to next, or to a pooled readChunk buffer
// when next is nil.
func (d *Decoder) use(next []byte) {
	var pooled *[]byte
	if next == nil {
		pooled = chunkPool.Get().(*[]byte)
		next = *pooled
	}
	if &next[0] == &d.buf[0] {
		return
	}
	n := copy(next, d.buf[d.start:d.end])
	d.scan -= d.start
	d.start, d.end = 0, n
	d.swap(next, pooled)
}

// swap makes next the buffer, handing a pooled one back.
func (d *Decoder) swap(next []byte, pooled *[]byte) {
	if d.pooled != nil {
		chunkPool.Put(d.pooled)
	}
	d.buf, d.pooled = next, pooled
}

func errFrameTooLarge(n int) *ProtocolError {
	return &ProtocolError{
		Code:    CodeFrameTooLarge,
		Message: "frame too large: more than " + strconv.Itoa(MaxFrameBytes) + " bytes (" + strconv.Itoa(n) + " seen)",
	}
}

// ParseFrame checks and decodes one record (without its LF; one trailing
// CR is ignored). The error, if any, is a *ProtocolError.
func ParseFrame(record []byte) (Frame, error) {
	if len(record) > MaxFrameBytes {
		return nil, errFrameTooLarge(len(record))
	}
	if n := len(record); n > 0 && record[n-1] == '\r' {
		record = record[:n-1]
	}
	s := parsers.Get().(*schema)
	defer parsers.Put(s)
	f, perr := s.parseFrame(record)
	if perr != nil {
		return nil, perr
	}
	return f, nil
}

var parsers = sync.Pool{New: func() any { return new(schema) }}

// parseFrame runs the checks of reference 1.3 in order: JSON syntax,
// object, known type, version, schema.
func (s *schema) parseFrame(rec []byte) (Frame, *ProtocolError) {
	f, err := s.checkFrame(rec)
	s.data = nil // do not pin the caller's buffer
	return f, err
}

func (s *schema) checkFrame(rec []byte) (Frame, *ProtocolError) {
	i := jsonscan.SkipSpace(rec, 0)
	if i == len(rec) {
		return nil, errInvalidJSON()
	}
	if rec[i] != '{' {
		end := s.sc.SkipValue(rec, i)
		if end < 0 || jsonscan.SkipSpace(rec, end) != len(rec) {
			return nil, errInvalidJSON()
		}
		return nil, errNotAnObject()
	}
	var end int
	var keys jsonscan.KeySet
	s.members, end, keys = s.sc.AppendMembers(s.members[:0], rec, i)
	if end < 0 || jsonscan.SkipSpace(rec, end) != len(rec) {
		return nil, errInvalidJSON()
	}
	s.data = rec
	s.setObject(0, len(s.members), keys)
	s.path, s.err, s.frameType = s.path[:0], nil, ""

	// "v" is looked up before "type" because encoders write it first, so
	// that both lookups find their member at the cursor; the checks still
	// run in the order of reference 1.3.
	v, hasV := s.lookup("v")
	typ, ok := s.lookup("type")
	if !ok || typ[0] != '"' {
		return nil, &ProtocolError{Code: CodeUnknownFrameType, Message: "frame has no string type"}
	}
	name := typ[1 : len(typ)-1]
	if hasBackslash(name) {
		name = jsonscan.AppendUnquoted(nil, name)
	}
	// A connection's frames come in runs of one type (a worker's
	// events), so the previous frame's kind spares most registry lookups.
	k := s.lastKind
	if k.new == nil || string(name) != k.name {
		if k, ok = registry[string(name)]; !ok {
			t := jsonscan.Unquote(typ, hasBackslash(typ))
			return nil, &ProtocolError{Code: CodeUnknownFrameType, Message: "unknown frame type " + strconv.Quote(t), FrameType: t}
		}
		s.lastKind = k
	}
	s.frameType = k.name

	if !hasV {
		return nil, errVersion("missing", k.name)
	}
	if n, why := decodeNumber(v); why != "" || n != ProtocolVersion {
		return nil, errVersion(string(v), k.name)
	}

	f := s.frames.take(k)
	h := f.Envelope()
	s.String("id", &h.ID, optional)
	s.String("traceId", &h.TraceID, optional)
	f.schema(s)
	if s.err != nil {
		return nil, s.err
	}
	return f, nil
}

func errInvalidJSON() *ProtocolError {
	return &ProtocolError{Code: CodeInvalidJSON, Message: "record is not valid JSON"}
}

func errNotAnObject() *ProtocolError {
	return &ProtocolError{Code: CodeNotAnObject, Message: "frame is not a JSON object"}
}

func errVersion(got, frameType string) *ProtocolError {
	return &ProtocolError{
		Code:      CodeUnsupportedVersion,
		Message:   "unsupported protocol version: " + got + " (expected 1)",
		FrameType: frameType,
	}
}
