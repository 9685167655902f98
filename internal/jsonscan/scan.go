package jsonscan

import "strconv"

// isSpace reports JSON whitespace: space, tab, LF and CR. Nothing else
// (no NBSP, no BOM) is whitespace to JSON.parse either.
var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// IsSpace reports whether c is JSON whitespace (space, tab, LF, CR).
func IsSpace(c byte) bool { return isSpace[c] }

// SkipSpace returns the index of the first non-whitespace byte at or after
// b[i]. Compact JSON has no whitespace, so one comparison usually settles
// it: every whitespace byte is <= ' '.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace[b[i]] {
		i++
	}
	return i
}

// SkipString validates the string starting at b[i] == '"' and returns the
// index after its closing quote, or -1. esc reports whether the string
// contains a backslash escape. Bytes of 0x80 and above are not checked:
// invalid UTF-8 is accepted here (and replaced when the string is
// decoded), as by JSON.parse after the stream's UTF-8 decoding and by
// encoding/json.
func SkipString(b []byte, i int) (end int, esc bool) {
	i++
	for {
		i = PlainEnd(b, i)
		if i >= len(b) {
			return -1, esc
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, esc
		case c == '\\':
			esc = true
			if i = skipEscape(b, i); i < 0 {
				return -1, esc
			}
		case c < 0x20:
			return -1, esc
		default:
			i++ // a plain byte in the last seven of the input
		}
	}
}

// skipEscape validates the escape sequence at b[i] == '\\' and returns the
// index after it, or -1.
func skipEscape(b []byte, i int) int {
	if i+1 >= len(b) {
		return -1
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2
	case 'u':
		if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
			return -1
		}
		return i + 6
	}
	return -1
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !isHexDigit(c) {
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// SkipNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// starting at b[i] and returns the index after it, or -1.
func SkipNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// Scanner validates JSON values and splits objects into members. Its zero
// value accepts any nesting depth; a Scanner is used by one goroutine at a
// time and keeps its memory from one value to the next.
type Scanner struct {
	// MaxDepth, when positive, bounds the nesting of arrays and objects:
	// a value nested deeper is invalid.
	MaxDepth int

	// deep holds the kinds of the open containers beyond the innermost
	// 64, which skipContainer keeps in a register (see containers).
	deep []bool

	// Where and why the last value was found invalid, for Err.
	errAt  int
	errWhy string
}

// Err describes why the last call that returned -1 did: the byte offset
// of the problem and a few words about it ("unterminated string").
func (sc *Scanner) Err() (offset int, reason string) {
	return sc.errAt, sc.errWhy
}

// fail records why b is invalid at i and returns -1.
func (sc *Scanner) fail(i int, why string) int {
	sc.errAt, sc.errWhy = i, why
	return -1
}

// SkipValue validates the JSON value starting at b[i] (leading whitespace
// allowed) and returns the index just after it, or -1 when the bytes are
// not one valid JSON value.
func (sc *Scanner) SkipValue(b []byte, i int) int {
	if i = SkipSpace(b, i); i >= len(b) {
		return sc.fail(i, "unexpected end of input")
	}
	if end := sc.valueEnd(b, i, 0); end >= 0 {
		return end
	}
	return sc.valueFailure(b, i)
}

// containers is the stack of open containers: bit k of objs says whether
// the container k levels out from the innermost one is an object (1) or
// an array (0). Levels beyond 64 spill to Scanner.deep, so the common case
// costs a shift and no memory.
type containers struct {
	objs  uint64
	depth int
}

func (c *containers) push(sc *Scanner, obj bool) {
	if c.depth >= 64 {
		sc.deep = append(sc.deep, c.objs>>63 != 0)
	}
	c.objs <<= 1
	if obj {
		c.objs |= 1
	}
	c.depth++
}

func (c *containers) pop(sc *Scanner) {
	c.objs >>= 1
	c.depth--
	if c.depth >= 64 {
		last := len(sc.deep) - 1
		if sc.deep[last] {
			c.objs |= 1 << 63
		}
		sc.deep = sc.deep[:last]
	}
}

// Reasons for Err.
const (
	whyEOF     = "unexpected end of input"
	whyValue   = "expected a value"
	whyKey     = "expected a string key"
	whyColon   = "expected ':' after an object key"
	whyNext    = "expected ',' or the closing bracket"
	whyString  = "unterminated string"
	whyEscape  = "invalid escape in string"
	whyControl = "control character in string"
	whyNumber  = "invalid number"
	whyLiteral = "invalid literal"
	whyTooDeep = "nested too deeply"
)

// unlimited is the nesting a zero MaxDepth allows.
const unlimited = 1 << 62

// skipContainer validates the object or array at b[i], which is nested in
// outer levels, and returns the index after it or -1.
//
// Skipping a nested value (event.event, rpc.command) is most of a frame's
// decoding time, so this is one flat loop with no calls on its common
// paths: the string scan and escape check are written out inline, each
// state tests for the byte compact JSON has there before considering
// whitespace, the stack of open containers lives in a register, and the
// gotos are the transitions of the grammar's states (value expected, key
// expected, value ended).
func (sc *Scanner) skipContainer(b []byte, i, outer int) int {
	var (
		open  containers
		isKey bool // the string being scanned is an object key
		c     byte
		start int // where the scalar being scanned starts
	)
	limit := unlimited // how many levels may open here
	if sc.MaxDepth > 0 {
		limit = sc.MaxDepth - outer
	}
	sc.deep = sc.deep[:0] // left over when the last value was invalid
value: // A value is expected at b[i].
	if i >= len(b) {
		return sc.fail(i, whyEOF)
	}
	c = b[i]
	if c == '"' {
		isKey = false
		goto str
	}
	switch c {
	case '{':
		if open.depth >= limit {
			return sc.fail(i, whyTooDeep)
		}
		if i = SkipSpace(b, i+1); i < len(b) && b[i] == '}' {
			i++
			goto ended
		}
		open.push(sc, true)
		goto key
	case '[':
		if open.depth >= limit {
			return sc.fail(i, whyTooDeep)
		}
		if i = SkipSpace(b, i+1); i < len(b) && b[i] == ']' {
			i++
			goto ended
		}
		open.push(sc, false)
		goto value
	case 't':
		start, i = i, skipLiteral(b, i, "true")
	case 'f':
		start, i = i, skipLiteral(b, i, "false")
	case 'n':
		start, i = i, skipLiteral(b, i, "null")
	case ' ', '\t', '\n', '\r':
		i = SkipSpace(b, i+1)
		goto value
	default:
		start, i = i, SkipNumber(b, i)
	}
	if i < 0 {
		return sc.scalarFailure(b, start)
	}
	goto ended

key: // An object key is expected at b[i] (whitespace already skipped).
	if i >= len(b) {
		return sc.fail(i, whyEOF)
	}
	if b[i] != '"' {
		return sc.fail(i, whyKey)
	}
	isKey = true

str: // b[i] is the opening quote of a string.
	for i++; ; {
		i = PlainEnd(b, i)
		if i >= len(b) {
			return sc.fail(i, whyString)
		}
		c = b[i]
		if c == '"' {
			i++
			break
		}
		switch {
		case c == '\\': // skipEscape, written out: this loop makes no calls
			if i+1 >= len(b) {
				return sc.fail(i, whyString)
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return sc.fail(i, whyEscape)
				}
				i += 6
			default:
				return sc.fail(i, whyEscape)
			}
		case c < 0x20:
			return sc.fail(i, whyControl)
		default:
			i++ // a plain byte in the last seven of the input
		}
	}
	if isKey {
		if i < len(b) && b[i] == ':' {
			i++
			goto value
		}
		if i = SkipSpace(b, i); i < len(b) && b[i] == ':' {
			i = SkipSpace(b, i+1)
			goto value
		}
		return sc.fail(i, whyColon)
	}

ended: // A value ended just before b[i]: close containers or go on.
	if open.depth == 0 {
		return i
	}
	if i >= len(b) {
		return sc.fail(i, whyEOF)
	}
	switch b[i] {
	case ',':
		if open.objs&1 == 0 {
			i++
			goto value // which skips its own whitespace
		}
		i = SkipSpace(b, i+1)
		goto key
	case '}':
		if open.objs&1 == 0 {
			return sc.fail(i, whyNext)
		}
	case ']':
		if open.objs&1 != 0 {
			return sc.fail(i, whyNext)
		}
	case ' ', '\t', '\n', '\r':
		i = SkipSpace(b, i+1)
		goto ended
	default:
		return sc.fail(i, whyNext)
	}
	open.pop(sc)
	i++
	goto ended
}

// valueEnd returns the index after the value starting at b[i] (not
// whitespace), nested in outer levels, or -1 when it is not valid JSON.
// Scalars, the common case, need no stack; their failures are recorded
// by valueFailure, off this path.
func (sc *Scanner) valueEnd(b []byte, i, outer int) int {
	switch b[i] {
	case '"':
		if end := PlainEnd(b, i+1); end < len(b) && b[end] == '"' {
			return end + 1
		}
		end, _ := SkipString(b, i)
		return end
	case '{', '[':
		return sc.skipContainer(b, i, outer)
	case 't':
		return skipLiteral(b, i, "true")
	case 'f':
		return skipLiteral(b, i, "false")
	case 'n':
		return skipLiteral(b, i, "null")
	}
	return SkipNumber(b, i)
}

// valueFailure records why valueEnd(b, i) returned -1 and returns -1. A
// container has recorded its own failure.
func (sc *Scanner) valueFailure(b []byte, i int) int {
	switch b[i] {
	case '{', '[':
		return -1
	case '"':
		return sc.stringFailure(b, i)
	}
	return sc.scalarFailure(b, i)
}

// scalarFailure records why the number or literal at b[i] is invalid.
func (sc *Scanner) scalarFailure(b []byte, i int) int {
	switch c := b[i]; {
	case c == 't' || c == 'f' || c == 'n':
		return sc.fail(i, whyLiteral)
	case c == '-' || '0' <= c && c <= '9':
		return sc.fail(i, whyNumber)
	}
	return sc.fail(i, whyValue)
}

// stringFailure records why the string at b[i], which SkipString refused,
// is invalid.
func (sc *Scanner) stringFailure(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return sc.fail(i, whyString) // not reached for a refused string
		case c == '\\':
			if j+1 >= len(b) {
				return sc.fail(i, whyString)
			}
			if skipEscape(b, j) < 0 {
				return sc.fail(j, whyEscape)
			}
			j++ // the escaped byte; a \u escape's digits are plain
		case c < 0x20:
			return sc.fail(j, whyControl)
		}
	}
	return sc.fail(i, whyString)
}

// Member is one "key": value pair of an object, as offsets into the input.
type Member struct {
	// Offsets are int32, which a record (at most a few MiB) never
	// outgrows: a smaller member is cheaper to append and to search.
	KeyStart, KeyEnd int32 // the key's content, without quotes
	ValStart, ValEnd int32 // the value's bytes
	// Sig is KeySig of the key, so that lookups compare one word before
	// comparing bytes; 0 when the key has escapes (compared the slow way).
	Sig    uint32
	KeyEsc bool // the key has backslash escapes
}

// Key returns the member's key as it is in b: without quotes, escapes not
// decoded.
func (m *Member) Key(b []byte) []byte { return b[m.KeyStart:m.KeyEnd] }

// Value returns the member's value as it is in b.
func (m *Member) Value(b []byte) []byte { return b[m.ValStart:m.ValEnd] }

// KeySig summarises a key: its length, first and last byte.
func KeySig[T string | []byte](key T) uint32 {
	if len(key) == 0 {
		return 1 << 31
	}
	return uint32(len(key))<<16 | uint32(key[0])<<8 | uint32(key[len(key)-1])
}

// KeyHash spreads a key signature over 32 bits (Fibonacci hashing), so
// that its top bits can index small tables.
func KeyHash(sig uint32) uint32 {
	return sig * 0x9E3779B1
}

// KeyBit maps a key signature to one bit of a 64-bit set (a one-hash
// Bloom filter).
func KeyBit(sig uint32) uint64 {
	return 1 << (KeyHash(sig) >> (32 - 6))
}

// KeySet summarises the keys of one object, for lookups.
type KeySet struct {
	Bits uint64 // KeyBit of every key without escapes
	// Distinct says that no key has escapes and no two keys share a bit:
	// then a name whose bit is clear is absent, and a name is present at
	// most once (so duplicate keys, which resolve to the last one, always
	// take the exhaustive path).
	Distinct bool
}

func (ks *KeySet) add(m *Member, b []byte) {
	if m.KeyEsc {
		ks.Distinct = false
		return
	}
	m.Sig = KeySig(b[m.KeyStart:m.KeyEnd])
	bit := KeyBit(m.Sig)
	if ks.Bits&bit != 0 {
		ks.Distinct = false
	}
	ks.Bits |= bit
}

// AppendMembers validates the object starting at b[i] == '{' and appends
// its members to ms. It returns the index after the closing brace, or -1,
// and the summary of the keys.
func (sc *Scanner) AppendMembers(ms []Member, b []byte, i int) ([]Member, int, KeySet) {
	keys := KeySet{Distinct: true}
	if i = SkipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return ms, i + 1, keys
	}
	for {
		if i >= len(b) {
			return ms, sc.fail(i, whyEOF), keys
		}
		if b[i] != '"' {
			return ms, sc.fail(i, whyKey), keys
		}
		m := Member{KeyStart: int32(i + 1)}
		// Keys are short and plain: find the closing quote inline and
		// leave escapes and input ends to SkipString.
		if end := PlainEnd(b, i+1); end < len(b) && b[end] == '"' {
			m.KeyEnd = int32(end)
		} else if end, m.KeyEsc = SkipString(b, i); end >= 0 {
			m.KeyEnd = int32(end - 1)
		} else {
			return ms, sc.stringFailure(b, i), keys
		}
		// keys.add, written out: a call per member is measurable here.
		if m.KeyEsc {
			keys.Distinct = false
		} else {
			m.Sig = KeySig(b[m.KeyStart:m.KeyEnd])
			bit := KeyBit(m.Sig)
			if keys.Bits&bit != 0 {
				keys.Distinct = false
			}
			keys.Bits |= bit
		}
		i = int(m.KeyEnd) + 1
		if i < len(b) && b[i] == ':' {
			i++
		} else if i = SkipSpace(b, i); i < len(b) && b[i] == ':' {
			i++
		} else {
			return ms, sc.fail(i, whyColon), keys
		}
		if i = SkipSpace(b, i); i >= len(b) {
			return ms, sc.fail(i, whyEOF), keys
		}
		m.ValStart = int32(i)
		if i = sc.valueEnd(b, i, 1); i < 0 {
			return ms, sc.valueFailure(b, int(m.ValStart)), keys
		}
		m.ValEnd = int32(i)
		ms = append(ms, m)
		if i = SkipSpace(b, i); i >= len(b) {
			return ms, sc.fail(i, whyEOF), keys
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return ms, i + 1, keys
		default:
			return ms, sc.fail(i, whyNext), keys
		}
	}
}

// SyntaxError describes input that is not one JSON value.
type SyntaxError struct {
	Offset int    // byte offset of the problem
	Reason string // what is wrong there
}

func (e *SyntaxError) Error() string {
	return "invalid JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Reason
}

// Check validates that b holds exactly one JSON value with optional
// surrounding whitespace, and returns the bounds of the value.
func (sc *Scanner) Check(b []byte) (start, end int, err *SyntaxError) {
	start = SkipSpace(b, 0)
	if end = sc.SkipValue(b, start); end < 0 {
		return 0, 0, &SyntaxError{Offset: sc.errAt, Reason: sc.errWhy}
	}
	if after := SkipSpace(b, end); after != len(b) {
		return 0, 0, &SyntaxError{Offset: after, Reason: "more after the value"}
	}
	return start, end, nil
}
