package scripted

import (
	"encoding/json"
	"io"
	"math"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"
)

// field is one member of an obj.
type field struct {
	key   string
	value any
}

// obj is a JSON object that keeps its members in order, so records read
// like pi's ("type" first). A nil value is left out, as JavaScript's
// JSON.stringify leaves out undefined.
type obj []field

func (o obj) MarshalJSON() ([]byte, error) { return o.appendJSON(nil) }

// appendJSON appends o's JSON to b in one pass. Nesting json.Marshal calls
// instead made encoding/json validate and compact every nested object
// again at each level of a record (a message inside agent_end's messages
// was scanned four times), which was half of the worker's time per event.
func (o obj) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	n := 0
	for _, f := range o {
		if isNil(f.value) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = appendKey(b, f.key)
		var err error
		if b, err = appendJSON(b, f.value); err != nil {
			return nil, err
		}
		n++
	}
	return append(b, '}'), nil
}

// appendJSON appends v's JSON to b: this package's ordered types directly,
// anything else as json.Marshal writes it (compact, HTML-escaped), so the
// bytes are those json.Marshal would write for the whole value.
func appendJSON(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case obj:
		return v.appendJSON(b)
	case *message:
		if v != nil {
			return v.obj().appendJSON(b)
		}
	case *entry:
		if v != nil && v.raw == nil {
			return v.obj().appendJSON(b)
		}
	case []*message:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, m := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, m); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case encodedJSON:
		return append(b, v...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case float64:
		return appendFloat(b, v)
	case []part:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, p := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = p.appendJSON(b); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case *usage:
		if v != nil {
			return v.appendJSON(b)
		}
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// appendString appends s as encoding/json writes a string: HTML-escaped,
// U+2028 and U+2029 escaped, invalid UTF-8 replaced by U+FFFD. Handing
// every string to json.Marshal was most of the worker's encoding time.
func appendString(b []byte, s string) []byte {
	return append(appendStringBody(append(b, '"'), s), '"')
}

// appendStringBody appends s escaped as appendString does, without the
// quotes: the escapes of two strings, one after the other, are those of
// the two joined when the first ends with a whole rune.
func appendStringBody(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// representation, in exponent form only below 1e-6 or from 1e21 on.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, 64)}
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendKey appends a member name and its colon; the names of this
// package's records are plain identifiers, anything else is quoted by
// encoding/json.
func appendKey(b []byte, key string) []byte {
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			k, _ := json.Marshal(key)
			return append(append(b, k...), ':')
		}
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// encodedJSON is a value written as JSON already: one encoding of a
// streamed partial message, which each of its message_update events
// carries twice.
type encodedJSON []byte

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// emitter writes records to stdout, one line each, never interleaved, in
// the order emit was called. A writer goroutine does the writing: records
// emitted while it writes go out together in its next write, so a reply
// that is produced faster than the pipe is read costs the reader (the
// shim, the agent) a few wakeups instead of one per line. No record waits
// for anything but the write before it; flush is for the points where pi,
// whose writes are synchronous, would have its records out already.
type emitter struct {
	w    io.Writer
	kick chan struct{}
	done chan struct{} // closed by close: the writer goroutine ends

	wmu sync.Mutex // held while writing; orders flush against the writer

	mu      sync.Mutex
	pending []byte
	spare   []byte
}

// maxSpare is the largest write buffer the emitter keeps for the next
// write: the updates of a long streamed answer are each hundreds of KB.
const maxSpare = 16 << 20

func newEmitter(w io.Writer) *emitter {
	e := &emitter{w: w, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go e.writeLoop()
	return e
}

// emit queues records to be written in one write, so that no other record
// can come between them (pi writes agent_end and auto_retry_start in one
// step).
func (e *emitter) emit(records ...any) {
	e.mu.Lock()
	buf := e.pending
	for _, r := range records {
		var err error
		if buf, err = appendJSON(buf, r); err != nil {
			panic(err) // every record is built by this program
		}
		buf = append(buf, '\n')
	}
	e.pending = buf
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default: // the writer is awake already and will find the records
	}
}

// writeLoop writes whatever is pending, whenever there is some, until
// close.
func (e *emitter) writeLoop() {
	for {
		select {
		case <-e.kick:
			e.writePending()
		case <-e.done:
			return
		}
	}
}

// writePending writes the pending records, if any, in one write. A
// failed write means the reader is gone; pi carries on the same way.
func (e *emitter) writePending() {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	buf := e.pending
	e.pending, e.spare = e.spare[:0], nil
	e.mu.Unlock()
	if len(buf) > 0 {
		_, _ = e.w.Write(buf)
	}
	e.mu.Lock()
	if e.spare == nil && cap(buf) <= maxSpare {
		e.spare = buf[:0]
	}
	e.mu.Unlock()
}

// flush writes every record emitted so far before it returns: before a
// side effect someone may act on (a tool process, the process's exit),
// as pi's synchronous writes would have.
func (e *emitter) flush() { e.writePending() }

// close flushes and ends the writer goroutine; records emitted later are
// not written.
func (e *emitter) close() {
	close(e.done)
	e.flush()
}

// response builds a command response; id "" is left out.
func response(id, command string, data any) obj {
	o := obj{{"id", nilIfEmpty(id)}, {"type", "response"}, {"command", command}, {"success", true}}
	if data != nil {
		o = append(o, field{"data", data})
	}
	return o
}

func errorResponse(id, command, message string) obj {
	return obj{{"id", nilIfEmpty(id)}, {"type", "response"}, {"command", command}, {"success", false}, {"error", message}}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// jsonNull is an explicit JSON null (a nil field value is left out).
var jsonNull = json.RawMessage("null")
