package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf8"
)

// Hash returns the bundleHash of a list of files: the
// files sorted by path in UTF-16 code-unit order (JavaScript's string
// order), then SHA-256 over "<path>\n<sha256>\n" for each, as 64 lowercase
// hex digits. Only paths and content hashes count: not sizes, not the name,
// not metadata. The order of files does not matter.
func Hash(files []File) string {
	if !slices.IsSortedFunc(files, compareFiles) {
		files = slices.Clone(files)
		slices.SortFunc(files, compareFiles)
	}
	h := sha256.New()
	buf := make([]byte, 0, 256)
	for _, f := range files {
		buf = append(buf[:0], f.Path...)
		buf = append(buf, '\n')
		buf = append(buf, f.SHA256...)
		buf = append(buf, '\n')
		h.Write(buf)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

func compareFiles(a, b File) int { return CompareUTF16(a.Path, b.Path) }

// CompareUTF16 compares two strings as JavaScript does: by UTF-16 code
// units. It equals byte (code point) order except where a character above
// U+FFFF meets one in U+E000–U+FFFF: the first is a surrogate pair
// starting at U+D800–U+DBFF, so it sorts before.
func CompareUTF16(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	switch {
	case i == len(a) && i == len(b):
		return 0
	case i == len(a):
		return -1
	case i == len(b):
		return 1
	}
	// Back up to the start of the characters that differ.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	ua, ub := firstUnit(ra), firstUnit(rb)
	switch {
	case ua < ub:
		return -1
	case ua > ub:
		return 1
	case ra < rb:
		return -1
	case ra > rb:
		return 1
	}
	// Only invalid UTF-8 gets here: fall back to byte order.
	return strings.Compare(a[i:], b[i:])
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + (r-0x10000)>>10
}

// sortFiles puts files in UTF-16 order of their paths, the order of a
// manifest, skipping the sort when they already are (the usual case).
func sortFiles(files []File) {
	if !slices.IsSortedFunc(files, compareFiles) {
		slices.SortStableFunc(files, compareFiles)
	}
}
