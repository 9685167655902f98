package jsonscan

import "bytes"

// Readers of JSON that was validated already (a member of a record scanned
// before) walk it by its delimiters alone. These functions never index out
// of range whatever the bytes, so a caller wrongly told that bytes are
// valid gets a wrong answer, not a panic.

// SkipValid returns the index after the value of valid JSON that starts at
// b[i] (not whitespace). At a delimiter, where no value starts, it returns
// i.
func SkipValid(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return validStringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = validStringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && !delimiter[b[i]] { // a number or a literal
		i++
	}
	return i
}

// validStringEnd returns the index after the string of valid JSON that
// starts at b[i].
func validStringEnd(b []byte, i int) int {
	i++
	for {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		i += q
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// delimiter marks the bytes that end a number or literal.
var delimiter = func() (t [256]bool) {
	for _, c := range []byte(" \t\r\n,:]}") {
		t[c] = true
	}
	return t
}()

// AppendValidMembers appends the members of the object of valid JSON that
// starts at b[i] == '{' to ms and returns the index after its closing
// brace, or -1 when the bytes do not have an object's structure.
func AppendValidMembers(ms []Member, b []byte, i int) ([]Member, int) {
	if i >= len(b) || b[i] != '{' {
		return ms, -1
	}
	if i = SkipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return ms, i + 1
	}
	var keys KeySet
	for {
		if i >= len(b) || b[i] != '"' {
			return ms, -1
		}
		end := validStringEnd(b, i)
		m := Member{KeyStart: int32(i + 1), KeyEnd: int32(end - 1)}
		if m.KeyEnd < m.KeyStart {
			return ms, -1
		}
		m.KeyEsc = bytes.IndexByte(m.Key(b), '\\') >= 0
		keys.add(&m, b)
		if i = SkipSpace(b, end); i >= len(b) || b[i] != ':' {
			return ms, -1
		}
		i = SkipSpace(b, i+1)
		m.ValStart = int32(i)
		if i = SkipValid(b, i); i == int(m.ValStart) {
			return ms, -1 // a delimiter where the value belongs
		}
		m.ValEnd = int32(i)
		ms = append(ms, m)
		if i = SkipSpace(b, i); i >= len(b) {
			return ms, -1
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return ms, i + 1
		default:
			return ms, -1
		}
	}
}

// NextElement returns the bounds of the next element of the array of valid
// JSON in b, where i is just after its '[' (first) or just after the
// previous element. more is false at the closing bracket; end is then -1
// when the bytes do not have an array's structure there.
func NextElement(b []byte, i int, first bool) (start, end int, more bool) {
	i = SkipSpace(b, i)
	if i >= len(b) {
		return 0, -1, false
	}
	if b[i] == ']' {
		return 0, 0, false
	}
	if !first {
		if b[i] != ',' {
			return 0, -1, false
		}
		i = SkipSpace(b, i+1)
	}
	if end = SkipValid(b, i); end == i {
		return 0, -1, false
	}
	return i, end, true
}
