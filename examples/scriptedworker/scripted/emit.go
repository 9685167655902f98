package scripted

import (
	"bytes"
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

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, f := range o {
		if isNil(f.value) {
			continue
		}
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
		n++
	}
	b.WriteByte('}')
	return b.Bytes(), nil
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
	var buf bytes.Buffer
	for _, r := range records {
		b, err := json.Marshal(r)
		if err != nil {
			panic(err) // every record is built by this program
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// A failed write means the reader is gone; pi carries on the same way.
	_, _ = e.w.Write(buf.Bytes())
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
