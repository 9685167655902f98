package transport

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"example.com/pifleet/internal/jsjson"
	"example.com/pifleet/internal/jsonscan"
)

// shape is a JSON object shape of the protocol: a frame or a shared shape
// such as ModelRef. Its schema method lists the fields, once, for both
// directions: the same method validates and decodes a received object and
// encodes an object to send, so the two can never disagree.
type shape interface {
	schema(s *schema)
}

// shapePtr is the constraint of the generic schema helpers (structField,
// optStructField, structsField): a pointer to T that implements shape.
type shapePtr[T any] interface {
	*T
	shape
}

// presence says whether a field must be present.
type presence bool

const (
	// optional fields may be absent. When encoding, an optional field at its
	// zero value (empty string, nil pointer/slice/map, false) is omitted,
	// never written as null.
	optional presence = false
	// required fields must be present. When encoding they are always
	// written: false, 0, "", [] (for a nil slice) and null (for a nil raw or
	// nullable value) included.
	required presence = true
)

// kindSet is a set of JSON value kinds, for raw fields restricted to some
// kinds (ui_response.value is string, boolean or null).
type kindSet uint8

// JSON value kinds.
const (
	kindString kindSet = 1 << iota
	kindNumber
	kindBool
	kindNull
	kindObject
	kindArray
	// kindAny is every kind.
	kindAny = kindString | kindNumber | kindBool | kindNull | kindObject | kindArray
)

// schema visits the fields of a shape. It runs in one of two modes:
// decoding (validate a received object and fill the Go value) or encoding
// (append the Go value as JSON). shape implementations only call its
// methods, in field order; they never look at the mode.
//
// When decoding, the first violation stops the visit and becomes the
// record's schema_violation error; later calls do nothing. A schema is used
// by one goroutine at a time.
type schema struct {
	encoding bool

	// Decoding.
	sc        jsonscan.Scanner
	data      []byte            // the record
	members   []jsonscan.Member // objects being visited, innermost last
	obj       object            // the object being visited
	path      []pathElem
	frameType string
	err       *ProtocolError

	strs     stringCache // recent short strings, see decodeString
	lastKind frameKind   // the previous frame's kind, see checkFrame
	frames   frameSlabs  // where decoded frames are allocated (slab.go)
	raws     rawArena    // where raw values are copied to (slab.go)

	// Encoding.
	buf    []byte
	comma  bool
	encErr *EncodeError
}

type pathElem struct {
	name  string
	index int // for array elements; name is "" then
}

// object is the object being visited.
type object struct {
	lo, hi int // its members are members[lo:hi]
	keys   jsonscan.KeySet
	// next is where the next lookup starts: a shape's schema method
	// visits its fields in the order the encoder writes them, so a frame
	// from a pifleet or TypeScript peer has the next field right there.
	next int
}

// setObject makes members[lo:hi], with the given keys, the current object.
func (s *schema) setObject(lo, hi int, keys jsonscan.KeySet) {
	s.obj = object{lo: lo, hi: hi, keys: keys, next: lo}
}

// lookup finds the value of the current object's member name. Duplicate
// keys resolve to the last one, as in JSON.parse.
func (s *schema) lookup(name string) (val []byte, ok bool) {
	sig := jsonscan.KeySig(name)
	o := &s.obj
	if o.keys.Distinct {
		// A name is present at most once: absent when its bit is clear,
		// else found by a search starting where the last one ended.
		if o.keys.Bits&jsonscan.KeyBit(sig) == 0 {
			return nil, false
		}
		for i := o.next; i < o.hi; i++ {
			if s.isKey(i, sig, name) {
				o.next = i + 1
				return s.value(i), true
			}
		}
		for i := o.lo; i < o.next; i++ {
			if s.isKey(i, sig, name) {
				o.next = i + 1
				return s.value(i), true
			}
		}
		return nil, false
	}
	for i := o.hi - 1; i >= o.lo; i-- {
		m := &s.members[i]
		switch {
		case m.Sig == sig:
			if string(s.data[m.KeyStart:m.KeyEnd]) != name {
				continue
			}
		case m.KeyEsc:
			if string(jsonscan.AppendUnquoted(nil, s.data[m.KeyStart:m.KeyEnd])) != name {
				continue
			}
		default:
			continue
		}
		return s.value(i), true
	}
	return nil, false
}

// isKey reports whether the key of members[i], an unescaped key, is name,
// whose keySig is sig.
func (s *schema) isKey(i int, sig uint32, name string) bool {
	m := &s.members[i]
	return m.Sig == sig && string(s.data[m.KeyStart:m.KeyEnd]) == name
}

// value returns the value of members[i].
func (s *schema) value(i int) []byte {
	m := &s.members[i]
	return s.data[m.ValStart:m.ValEnd]
}

// field is the common start of every decoding visit: it returns the
// field's raw value, or ok=false when it is absent (failing if required)
// or when an earlier violation stopped the visit.
func (s *schema) field(name string, p presence) ([]byte, bool) {
	if s.err != nil {
		return nil, false
	}
	v, ok := s.lookup(name)
	if !ok && p == required {
		s.fail("", "must have required properties "+name)
	}
	return v, ok
}

// fail records the first violation, at the current object's path plus
// field (if any).
func (s *schema) fail(field, reason string) {
	if s.err != nil {
		return
	}
	var ptr strings.Builder
	for _, e := range s.path {
		ptr.WriteByte('/')
		if e.name == "" {
			ptr.WriteString(strconv.Itoa(e.index))
		} else {
			writePointerToken(&ptr, e.name)
		}
	}
	if field != "" {
		ptr.WriteByte('/')
		writePointerToken(&ptr, field)
	}
	msg := "invalid " + s.frameType + " frame"
	if ptr.Len() > 0 {
		msg += " at " + ptr.String()
	}
	s.err = &ProtocolError{Code: CodeSchemaViolation, Message: msg + ": " + reason, FrameType: s.frameType}
}

// writePointerToken escapes a JSON pointer token (RFC 6901).
// failIn records a violation inside field: at element sub (an index or a
// key) of it.
func (s *schema) failIn(field, sub, reason string) {
	s.path = append(s.path, pathElem{name: field})
	s.fail(sub, reason)
	s.path = s.path[:len(s.path)-1]
}

func writePointerToken(b *strings.Builder, tok string) {
	for _, r := range tok {
		switch r {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteRune(r)
		}
	}
}

func (s *schema) encFail(field, reason string) {
	if s.encErr == nil {
		s.encErr = &EncodeError{FrameType: s.frameType, Path: "/" + field, Reason: reason}
	}
}

// key appends `,"name":` (the comma only between members).
func (s *schema) key(name string) {
	if s.comma {
		s.buf = append(s.buf, ',')
	}
	s.comma = true
	s.buf = jsjson.AppendString(s.buf, name)
	s.buf = append(s.buf, ':')
}

// decodeString returns the value of the JSON string token v, or false
// when v is not a string.
func (s *schema) decodeString(v []byte) (string, bool) {
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	if str, ok := s.strs.find(body); ok {
		return str, true
	}
	if jsonscan.PlainASCII(body) { // the common case: the bytes are the value
		return s.strs.add(body), true
	}
	return jsonscan.Unquote(v, hasBackslash(v)), true
}

// stringCache holds the last few short strings a Schema decoded. The short
// values of a connection's frames repeat from one frame to the next
// (instance ids, machine and model names, states), so decoding one is
// usually a comparison instead of an allocation. Strings are immutable:
// sharing one between frames is invisible to their users.
//
// It holds only strings whose JSON body is plain ASCII (no escapes), so a
// body equal to a cached string is known to decode to it.
type stringCache [1 << stringCacheBits]string

const stringCacheBits = 4

// maxCachedString bounds what the cache holds: ids and names, not text.
const maxCachedString = 40

func (c *stringCache) slot(body []byte) *string {
	return &c[jsonscan.KeyHash(jsonscan.KeySig(body))>>(32-stringCacheBits)]
}

// find returns the cached string equal to body, if any.
func (c *stringCache) find(body []byte) (string, bool) {
	if len(body) == 0 || len(body) > maxCachedString {
		return "", false
	}
	str := *c.slot(body)
	return str, str == string(body) // compares without allocating
}

// add returns body, a plain ASCII string body, as a string, and caches it
// when it is short.
func (c *stringCache) add(body []byte) string {
	str := string(body)
	if len(body) != 0 && len(body) <= maxCachedString {
		*c.slot(body) = str
	}
	return str
}

func hasBackslash(v []byte) bool { return bytes.IndexByte(v, '\\') >= 0 }

// String visits a string field. An optional string is omitted when empty.
func (s *schema) String(name string, p *string, pr presence) {
	if s.encoding {
		if pr == required || *p != "" {
			s.key(name)
			s.buf = jsjson.AppendString(s.buf, *p)
		}
		return
	}
	if v, ok := s.field(name, pr); ok {
		if str, ok := s.decodeString(v); ok {
			*p = str
		} else {
			s.fail(name, "must be string")
		}
	}
}

// StringPtr visits an optional string field where "" and absent differ
// (fs_result.text: an empty file has text ""). nil is omitted.
func (s *schema) StringPtr(name string, p **string) {
	if s.encoding {
		if *p != nil {
			s.key(name)
			s.buf = jsjson.AppendString(s.buf, **p)
		}
		return
	}
	if v, ok := s.field(name, optional); ok {
		if str, ok := s.decodeString(v); ok {
			*p = &str
		} else {
			s.fail(name, "must be string")
		}
	}
}

// NullableString visits a string-or-null field (exec_exit.signal). A
// required one is written as null when nil; an optional one is omitted.
func (s *schema) NullableString(name string, p **string, pr presence) {
	if s.encoding {
		switch {
		case *p != nil:
			s.key(name)
			s.buf = jsjson.AppendString(s.buf, **p)
		case pr == required:
			s.key(name)
			s.buf = append(s.buf, "null"...)
		}
		return
	}
	if v, ok := s.field(name, pr); ok {
		if str, ok := s.decodeString(v); ok {
			*p = &str
		} else if string(v) != "null" {
			s.fail(name, "must be string,null")
		}
	}
}

// enum visits a string field restricted to allowed values. Decoding stores
// the matching constant, so it never allocates.
func enum[T ~string](s *schema, name string, p *T, pr presence, allowed ...T) {
	if s.encoding {
		if pr == required || *p != "" {
			s.key(name)
			s.buf = jsjson.AppendString(s.buf, string(*p))
		}
		return
	}
	v, ok := s.field(name, pr)
	if !ok {
		return
	}
	if len(v) == 0 || v[0] != '"' {
		s.fail(name, "must be string")
		return
	}
	body := v[1 : len(v)-1]
	if hasBackslash(body) {
		body = jsonscan.AppendUnquoted(nil, body)
	}
	for _, a := range allowed {
		if string(body) == string(a) {
			*p = a
			return
		}
	}
	s.fail(name, "must be equal to one of the allowed values")
}

func decodeNumber(v []byte) (float64, string) {
	if len(v) == 0 || !(v[0] == '-' || '0' <= v[0] && v[0] <= '9') {
		return 0, "must be number"
	}
	f, ok := jsonscan.ParseNumber(v)
	if !ok {
		return 0, "must be a finite number"
	}
	return f, ""
}

func (s *schema) appendNumber(name string, f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		s.encFail(name, "number is not finite")
		f = 0
	}
	s.buf = jsjson.AppendNumber(s.buf, f)
}

// Number visits a required number field. Any JSON number is accepted, as
// in JavaScript; integers up to 2^53 are exact.
func (s *schema) Number(name string, p *float64) {
	if s.encoding {
		s.key(name)
		s.appendNumber(name, *p)
		return
	}
	if v, ok := s.field(name, required); ok {
		if f, why := decodeNumber(v); why == "" {
			*p = f
		} else {
			s.fail(name, why)
		}
	}
}

// OptNumber visits an optional number field; nil is omitted.
func (s *schema) OptNumber(name string, p **float64) {
	if s.encoding {
		if *p != nil {
			s.key(name)
			s.appendNumber(name, **p)
		}
		return
	}
	if v, ok := s.field(name, optional); ok {
		if f, why := decodeNumber(v); why == "" {
			*p = &f
		} else {
			s.fail(name, why)
		}
	}
}

// NullableNumber visits a number-or-null field (exec_exit.exitCode). A
// required one is written as null when nil; an optional one is omitted
// (and null decodes as nil).
func (s *schema) NullableNumber(name string, p **float64, pr presence) {
	if s.encoding {
		switch {
		case *p != nil:
			s.key(name)
			s.appendNumber(name, **p)
		case pr == required:
			s.key(name)
			s.buf = append(s.buf, "null"...)
		}
		return
	}
	if v, ok := s.field(name, pr); ok {
		if string(v) == "null" {
			*p = nil
		} else if f, why := decodeNumber(v); why == "" {
			*p = &f
		} else {
			s.fail(name, "must be number,null")
		}
	}
}

// Bool visits a boolean field. A required one is always written (false
// included); an optional one only when true.
func (s *schema) Bool(name string, p *bool, pr presence) {
	if s.encoding {
		if pr == required || *p {
			s.key(name)
			s.buf = strconv.AppendBool(s.buf, *p)
		}
		return
	}
	if v, ok := s.field(name, pr); ok {
		switch string(v) {
		case "true":
			*p = true
		case "false":
			*p = false
		default:
			s.fail(name, "must be boolean")
		}
	}
}

// Strings visits an array of strings. A required nil slice is written as
// []; an optional nil slice is omitted. Decoding [] gives an empty,
// non-nil slice.
func (s *schema) Strings(name string, p *[]string, pr presence) {
	if s.encoding {
		if *p == nil && pr == optional {
			return
		}
		s.key(name)
		s.buf = append(s.buf, '[')
		for i, str := range *p {
			if i > 0 {
				s.buf = append(s.buf, ',')
			}
			s.buf = jsjson.AppendString(s.buf, str)
		}
		s.buf = append(s.buf, ']')
		return
	}
	v, ok := s.field(name, pr)
	if !ok {
		return
	}
	if v[0] != '[' {
		s.fail(name, "must be array")
		return
	}
	out := make([]string, 0)
	for i, at, first := 0, 1, true; ; i, first = i+1, false {
		start, end, more := jsonscan.NextElement(v, at, first)
		if !more {
			break
		}
		str, ok := s.decodeString(v[start:end])
		if !ok {
			s.failIn(name, strconv.Itoa(i), "must be string")
			return
		}
		out = append(out, str)
		at = end
	}
	*p = out
}

// StringMap visits an object whose values are all strings (spawn.env). A
// required nil map is written as {}; an optional nil map is omitted.
func (s *schema) StringMap(name string, p *map[string]string, pr presence) {
	if s.encoding {
		if *p == nil && pr == optional {
			return
		}
		s.key(name)
		s.buf = append(s.buf, '{')
		first := true
		for _, k := range sortedKeys(*p) {
			if !first {
				s.buf = append(s.buf, ',')
			}
			first = false
			s.buf = jsjson.AppendString(s.buf, k)
			s.buf = append(s.buf, ':')
			s.buf = jsjson.AppendString(s.buf, (*p)[k])
		}
		s.buf = append(s.buf, '}')
		return
	}
	v, ok := s.field(name, pr)
	if !ok {
		return
	}
	if v[0] != '{' {
		s.fail(name, "must be object")
		return
	}
	base := len(s.members)
	s.members, _, _ = s.sc.AppendMembers(s.members, v, 0)
	out := make(map[string]string, len(s.members)-base)
	for _, m := range s.members[base:] {
		key := jsonscan.Unquote(v[m.KeyStart-1:m.KeyEnd+1], m.KeyEsc)
		str, ok := s.decodeString(v[m.ValStart:m.ValEnd])
		if !ok {
			s.members = s.members[:base]
			s.failIn(name, key, "must be string")
			return
		}
		out[key] = str
	}
	s.members = s.members[:base]
	*p = out
}

// Raw visits a field that holds any JSON value, kept verbatim
// (rpc.command, event.event). A required raw field is written as null when
// nil: the key is always present.
func (s *schema) Raw(name string, p *json.RawMessage, pr presence) {
	s.RawOf(name, p, pr, kindAny)
}

// RawOf is Raw restricted to some kinds of JSON value.
func (s *schema) RawOf(name string, p *json.RawMessage, pr presence, kinds kindSet) {
	if s.encoding {
		switch {
		case *p != nil:
			s.key(name)
			s.appendRaw(name, *p)
		case pr == required:
			s.key(name)
			s.buf = append(s.buf, "null"...)
		}
		return
	}
	v, ok := s.field(name, pr)
	if !ok {
		return
	}
	if kinds != kindAny && kindOf(v)&kinds == 0 {
		s.fail(name, "must be "+kinds.String())
		return
	}
	*p = s.raws.clone(v)
}

func kindOf(v []byte) kindSet {
	switch v[0] {
	case '"':
		return kindString
	case 't', 'f':
		return kindBool
	case 'n':
		return kindNull
	case '{':
		return kindObject
	case '[':
		return kindArray
	default:
		return kindNumber
	}
}

// String lists the kinds the way schema messages name them ("string,boolean,null").
func (k kindSet) String() string {
	names := []string{"string", "number", "boolean", "null", "object", "array"}
	var out []string
	for i, n := range names {
		if k&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// appendRaw appends a raw JSON value after checking that it is exactly one
// JSON value. A value spread over several lines (json.MarshalIndent
// output) is compacted, since a frame must be one line.
func (s *schema) appendRaw(name string, raw json.RawMessage) {
	start := jsonscan.SkipSpace(raw, 0)
	end := s.sc.SkipValue(raw, start)
	if end < 0 || jsonscan.SkipSpace(raw, end) != len(raw) {
		s.encFail(name, "raw value is not valid JSON")
		s.buf = append(s.buf, "null"...)
		return
	}
	raw = raw[start:end]
	if bytes.IndexByte(raw, '\n') >= 0 || bytes.IndexByte(raw, '\r') >= 0 {
		s.buf = appendCompact(s.buf, raw)
		return
	}
	s.buf = append(s.buf, raw...)
}

// appendCompact appends valid JSON without the whitespace between tokens.
func appendCompact(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c == '"' {
			end, _ := jsonscan.SkipString(src, i)
			dst = append(dst, src[i:end]...)
			i = end
			continue
		}
		if !jsonscan.IsSpace(c) {
			dst = append(dst, c)
		}
		i++
	}
	return dst
}

// enterObject makes the object v the current one; leaveObject restores
// the one it returns.
func (s *schema) enterObject(name string, index int, v []byte) (outer object) {
	outer = s.obj
	base := len(s.members)
	// v is always a subslice of the record, so its offset there follows
	// from the capacities; members are stored as offsets into the record.
	off := cap(s.data) - cap(v)
	var keys jsonscan.KeySet
	s.members, _, keys = s.sc.AppendMembers(s.members, s.data, off)
	s.setObject(base, len(s.members), keys)
	s.path = append(s.path, pathElem{name: name, index: index})
	return outer
}

func (s *schema) leaveObject(outer object) {
	s.members = s.members[:s.obj.lo]
	s.obj = outer
	s.path = s.path[:len(s.path)-1]
}

// structField visits a required nested object.
func structField[T any, P shapePtr[T]](s *schema, name string, p *T) {
	if s.encoding {
		s.key(name)
		s.appendObject(P(p))
		return
	}
	if v, ok := s.field(name, required); ok {
		decodeObject[T, P](s, name, -1, v, p)
	}
}

// optStructField visits an optional nested object; nil is omitted.
func optStructField[T any, P shapePtr[T]](s *schema, name string, p **T) {
	if s.encoding {
		if *p != nil {
			s.key(name)
			s.appendObject(P(*p))
		}
		return
	}
	if v, ok := s.field(name, optional); ok {
		t := new(T)
		if decodeObject[T, P](s, name, -1, v, t) {
			*p = t
		}
	}
}

// structsField visits an array of objects. A required nil slice is written as
// []; an optional nil slice is omitted. Decoding [] gives an empty,
// non-nil slice.
func structsField[T any, P shapePtr[T]](s *schema, name string, p *[]T, pr presence) {
	if s.encoding {
		if *p == nil && pr == optional {
			return
		}
		s.key(name)
		s.buf = append(s.buf, '[')
		for i := range *p {
			if i > 0 {
				s.buf = append(s.buf, ',')
			}
			s.appendObject(P(&(*p)[i]))
		}
		s.buf = append(s.buf, ']')
		return
	}
	v, ok := s.field(name, pr)
	if !ok {
		return
	}
	if v[0] != '[' {
		s.fail(name, "must be array")
		return
	}
	out := make([]T, 0)
	s.path = append(s.path, pathElem{name: name})
	for i, at, first := 0, 1, true; ; i, first = i+1, false {
		start, end, more := jsonscan.NextElement(v, at, first)
		if !more {
			break
		}
		var zero T
		out = append(out, zero)
		if !decodeObject[T, P](s, "", i, v[start:end], &out[i]) {
			break
		}
		at = end
	}
	s.path = s.path[:len(s.path)-1]
	if s.err == nil {
		*p = out
	}
}

// decodeObject checks that v is an object and visits it into p.
func decodeObject[T any, P shapePtr[T]](s *schema, name string, index int, v []byte, p *T) bool {
	if v[0] != '{' {
		if name == "" {
			s.path = append(s.path, pathElem{index: index})
			s.fail("", "must be object")
			s.path = s.path[:len(s.path)-1]
		} else {
			s.fail(name, "must be object")
		}
		return false
	}
	outer := s.enterObject(name, index, v)
	P(p).schema(s)
	s.leaveObject(outer)
	return s.err == nil
}

func (s *schema) appendObject(o shape) {
	s.buf = append(s.buf, '{')
	s.comma = false
	o.schema(s)
	s.buf = append(s.buf, '}')
	s.comma = true
}
