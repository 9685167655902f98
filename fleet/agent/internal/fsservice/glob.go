package fsservice

import (
	"strings"
	"unicode/utf8"
)

// Glob matches slash-separated relative paths against the glob syntax of
// reference 1.16: "**/" is any number of directories (zero included), "**"
// is anything, "*" is anything within one segment, "?" is one character
// other than "/", and everything else is literal. A glob matches the whole
// path.
//
// Matching simulates the glob as a small automaton over the path's
// characters, so it takes time proportional to len(path) × len(glob)
// whatever the pattern: no backtracking blow-up. A byte that is not valid
// UTF-8 counts as one character that only itself matches literally.
type Glob struct {
	toks []globTok
}

type globKind uint8

const (
	globLit       globKind = iota // one literal character
	globOne                       // ?
	globStar                      // *
	globAny                       // ** not followed by /
	globAnyDirs                   // **/
	globAcceptTok                 // sentinel: the end of the glob
)

type globTok struct {
	kind globKind
	lit  string // the character's bytes, for globLit
}

// CompileGlob parses a glob. Every string is a valid glob.
func CompileGlob(glob string) *Glob {
	var toks []globTok
	for i := 0; i < len(glob); {
		switch {
		case strings.HasPrefix(glob[i:], "**/"):
			toks = append(toks, globTok{kind: globAnyDirs})
			i += 3
		case strings.HasPrefix(glob[i:], "**"):
			toks = append(toks, globTok{kind: globAny})
			i += 2
		case glob[i] == '*':
			toks = append(toks, globTok{kind: globStar})
			i++
		case glob[i] == '?':
			toks = append(toks, globTok{kind: globOne})
			i++
		default:
			_, n := utf8.DecodeRuneInString(glob[i:])
			toks = append(toks, globTok{kind: globLit, lit: glob[i : i+n]})
			i += n
		}
	}
	return &Glob{toks: append(toks, globTok{kind: globAcceptTok})}
}

// Match reports whether path matches the whole glob.
//
// States: "at token i" for every token, plus "inside token i" for each
// "**/", whose (.*/)? body has been entered and needs a "/" to finish.
func (g *Glob) Match(path string) bool {
	n := len(g.toks)
	var bufA, bufB [64]bool // no allocation for globs of up to 32 tokens
	var cur, next []bool
	if 2*n <= len(bufA) {
		cur, next = bufA[:2*n], bufB[:2*n]
	} else {
		cur, next = make([]bool, 2*n), make([]bool, 2*n)
	}
	g.enter(cur, 0)
	for i := 0; i < len(path); {
		_, w := utf8.DecodeRuneInString(path[i:])
		ch := path[i : i+w]
		i += w
		clear(next)
		alive := false
		for s, on := range cur {
			if !on {
				continue
			}
			alive = true
			if s >= n { // inside "**/" number s-n
				t := s - n
				next[s] = true
				if ch == "/" {
					g.enter(next, t+1)
				}
				continue
			}
			switch tok := g.toks[s]; tok.kind {
			case globLit:
				if ch == tok.lit {
					g.enter(next, s+1)
				}
			case globOne:
				if ch != "/" {
					g.enter(next, s+1)
				}
			case globStar:
				if ch != "/" {
					g.enter(next, s)
				}
			case globAny:
				g.enter(next, s)
			}
		}
		if !alive {
			return false
		}
		cur, next = next, cur
	}
	return cur[n-1]
}

// enter marks state s and everything reachable from it without consuming
// a character: a star of any kind may match nothing.
func (g *Glob) enter(set []bool, s int) {
	n := len(g.toks)
	for ; s < n; s++ {
		set[s] = true
		switch g.toks[s].kind {
		case globStar, globAny:
			continue // may be empty: the next token is reachable too
		case globAnyDirs:
			set[n+s] = true // or its body is entered
			continue
		}
		return
	}
}
