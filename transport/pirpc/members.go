package pirpc

import (
	"strings"
	"unicode/utf8"

	"example.com/pifleet/internal/jsonscan"
)

// ParseRecord validates pi's lines with the project's JSON scanner
// (internal/jsonscan) in one pass, keeps the top-level members as spans of
// the line, and decodes only the few it needs. encoding/json would validate
// a whole line in a first pass and decode it in a second, both byte by byte
// through a state machine, though pi's lines are mostly messages the agent
// only forwards. Anything this fast path is unsure of makes ParseRecord
// fall back to encoding/json, so the results are encoding/json's.

// maxScanDepth bounds nesting; deeper lines go to encoding/json (which
// allows 10,000 levels), so the limit changes nothing but the path taken.
const maxScanDepth = 512

// memberBuf is room for the members of one object on the stack: pi's
// objects have a dozen members at most, a larger one grows on the heap.
type memberBuf [24]jsonscan.Member

// objectMembers splits the object that b holds (with optional surrounding
// whitespace) into its members, validating it unless valid says it was
// validated before. ok is false when b is not exactly one object, or is
// nested deeper than maxScanDepth.
func objectMembers(buf *memberBuf, b []byte, valid bool) (ms []jsonscan.Member, ok bool) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	var end int
	if valid {
		ms, end = jsonscan.AppendValidMembers(buf[:0], b, i)
	} else {
		sc := jsonscan.Scanner{MaxDepth: maxScanDepth}
		ms, end, _ = sc.AppendMembers(buf[:0], b, i)
	}
	return ms, end >= 0 && jsonscan.SkipSpace(b, end) == len(b)
}

// plainString returns the text of a string span that needs no decoding
// (no escapes, valid UTF-8), and false for any other span.
func plainString(span []byte) (string, bool) {
	if len(span) < 2 || span[0] != '"' {
		return "", false
	}
	body := span[1 : len(span)-1]
	ascii := true
	for _, c := range body {
		if c == '\\' {
			return "", false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii && !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// fieldSet names the JSON members of one struct for eachMember.
type fieldSet struct {
	exact  map[string]int  // name → index (< 64)
	folded map[string]bool // the names in lower case
}

func newFieldSet(names ...string) fieldSet {
	fs := fieldSet{exact: make(map[string]int, len(names)), folded: make(map[string]bool, len(names))}
	for i, n := range names {
		fs.exact[n] = i
		fs.folded[strings.ToLower(n)] = true
	}
	return fs
}

// foldsTo reports whether encoding/json could match key to one of the
// names by case folding (any non-ASCII key counts: Unicode folding maps a
// few letters to ASCII ones).
func (fs fieldSet) foldsTo(key []byte) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	var lower [32]byte
	if len(key) > len(lower) {
		return false // longer than every field name
	}
	for i, c := range key {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return fs.folded[string(lower[:len(key)])]
}

// eachMember calls set for each member of the object span (a member of
// a line validated already) that names a field of fs. It reports false
// when span is not an object, when a key is escaped, repeated or matches a
// field only by case folding (encoding/json's business), or when set
// returns false.
func eachMember(span []byte, fs fieldSet, set func(field int, value []byte) bool) bool {
	return len(span) > 0 && span[0] == '{' && eachLineMember(span, true, fs, set)
}

// eachLineMember is eachMember for a whole line, which it validates
// unless the caller says it is valid already.
func eachLineMember(line []byte, valid bool, fs fieldSet, set func(field int, value []byte) bool) bool {
	var buf memberBuf
	ms, ok := objectMembers(&buf, line, valid)
	if !ok {
		return false
	}
	return eachMemberOf(ms, line, fs, set)
}

// eachMemberOf is eachLineMember for members split already.
func eachMemberOf(ms []jsonscan.Member, line []byte, fs fieldSet, set func(field int, value []byte) bool) bool {
	var seen uint64
	for k := range ms {
		m := &ms[k]
		if m.KeyEsc {
			return false
		}
		key := m.Key(line)
		f, ok := fs.exact[string(key)]
		if !ok {
			if fs.foldsTo(key) {
				return false
			}
			continue
		}
		if seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		if !set(f, m.Value(line)) {
			return false
		}
	}
	return true
}
