package pathsafe

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// LowerJS returns s lower-cased exactly as JavaScript's
// String.prototype.toLowerCase does (ECMA-262: Unicode full case mapping,
// locale-independent). It differs from strings.ToLower in the two places
// where the full mapping differs from the simple one Go uses:
//
//   - U+0130 (İ) becomes "i" followed by U+0307 COMBINING DOT ABOVE, not "i";
//   - U+03A3 (Σ) becomes final sigma U+03C2 (ς) at the end of a word (the
//     Final_Sigma condition of Unicode's SpecialCasing), σ elsewhere.
//
// Every other character follows Go's unicode tables; the Unicode versions of
// Go and of the JavaScript engine may differ for characters added recently.
func LowerJS(s string) string {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf {
			simple = false
			break
		}
	}
	if simple {
		return strings.ToLower(s)
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	for i, r := range s {
		switch r {
		case 'İ':
			b.WriteString("i\u0307")
		case 'Σ':
			if finalSigma(s, i, i+utf8.RuneLen(r)) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma reports the Final_Sigma condition for the Σ at s[start:end]:
// it is preceded by a cased letter (case-ignorable characters in between
// allowed) and not followed by one (same allowance).
func finalSigma(s string, start, end int) bool {
	before := false
	for i := start; i > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
		if caseIgnorable(r) {
			continue
		}
		before = cased(r)
		break
	}
	if !before {
		return false
	}
	for i := end; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if caseIgnorable(r) {
			continue
		}
		return !cased(r)
	}
	return true
}

// cased is Unicode's Cased property: Lowercase, Uppercase or Lt.
func cased(r rune) bool {
	return unicode.IsLower(r) || unicode.IsUpper(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}

// caseIgnorable is Unicode's Case_Ignorable property: general categories Mn,
// Me, Cf, Lm and Sk, and the Word_Break classes MidLetter, MidNumLet and
// Single_Quote (listed here because Go's tables do not carry Word_Break).
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', // Single_Quote
		'.', '\u2018', '\u2019', '\u2024', '\uFE52', '\uFF07', '\uFF0E', // MidNumLet
		':', '\u00B7', '\u0387', '\u055F', '\u05F4', '\u2027', '\uFE13', '\uFE55', '\uFF1A': // MidLetter
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
