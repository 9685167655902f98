package scripted

import (
	"encoding/json"
	"io"
	"reflect"
	"sync"
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
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
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

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// emitter writes records to stdout, one line each, never interleaved.
type emitter struct {
	mu sync.Mutex
	w  io.Writer
}

func newEmitter(w io.Writer) *emitter { return &emitter{w: w} }

// emit writes records in one write, so that no other record can come
// between them (pi writes agent_end and auto_retry_start in one step).
func (e *emitter) emit(records ...any) {
	var buf []byte
	for _, r := range records {
		var err error
		if buf, err = appendJSON(buf, r); err != nil {
			panic(err) // every record is built by this program
		}
		buf = append(buf, '\n')
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A failed write means the reader is gone; pi carries on the same way.
	_, _ = e.w.Write(buf)
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
