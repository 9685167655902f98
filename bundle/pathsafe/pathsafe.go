package pathsafe

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Code names the rule a path breaks. The values are the protocol's
// and appear on the wire.
type Code string

// The rules, in the order Check applies them (the first failure wins),
// and the set rule of CheckSet.
const (
	Empty              Code = "empty"
	Backslash          Code = "backslash"
	Absolute           Code = "absolute"
	DriveLetter        Code = "drive_letter"
	InvalidCharacters  Code = "invalid_characters"
	EmptySegment       Code = "empty_segment"
	Traversal          Code = "traversal"
	DotSegment         Code = "dot_segment"
	TrailingDotOrSpace Code = "trailing_dot_or_space"
	ReservedName       Code = "reserved_name"
	CaseCollision      Code = "case_collision"
)

// ErrUnsafe is matched (errors.Is) by every error of this package that
// refuses a path: *Error, *SetError and *EscapeError.
var ErrUnsafe = errors.New("unsafe path")

// Error reports one path that breaks a rule.
type Error struct {
	// Path is the path as given.
	Path string
	// Code is the rule it breaks.
	Code Code
	// Segment is the offending "/"-separated segment, for the segment rules
	// (empty_segment, traversal, dot_segment, trailing_dot_or_space,
	// reserved_name).
	Segment string
	// CollidesWith is the earlier path of the set that this one equals
	// when case is ignored (case_collision only).
	CollidesWith string
}

func (e *Error) Error() string {
	switch {
	case e.Code == CaseCollision:
		return fmt.Sprintf("unsafe path %q (%s): same file as %q when case is ignored", e.Path, e.Code, e.CollidesWith)
	case e.Segment != "" || segmentRule(e.Code):
		return fmt.Sprintf("unsafe path %q (%s in segment %q)", e.Path, e.Code, e.Segment)
	default:
		return fmt.Sprintf("unsafe path %q (%s)", e.Path, e.Code)
	}
}

// Is makes errors.Is(err, ErrUnsafe) true.
func (e *Error) Is(target error) bool { return target == ErrUnsafe }

func segmentRule(c Code) bool {
	switch c {
	case EmptySegment, Traversal, DotSegment, TrailingDotOrSpace, ReservedName:
		return true
	}
	return false
}

// SetError reports every unsafe path of a set, in the order of the set.
type SetError struct {
	Errors []*Error
}

func (e *SetError) Error() string {
	if len(e.Errors) == 1 {
		return e.Errors[0].Error()
	}
	const shown = 3
	parts := make([]string, 0, shown)
	for _, pe := range e.Errors[:min(shown, len(e.Errors))] {
		parts = append(parts, pe.Error())
	}
	more := ""
	if n := len(e.Errors) - shown; n > 0 {
		more = fmt.Sprintf("; and %d more", n)
	}
	return fmt.Sprintf("%d unsafe paths: %s%s", len(e.Errors), strings.Join(parts, "; "), more)
}

// Unwrap exposes each *Error to errors.As and errors.Is.
func (e *SetError) Unwrap() []error {
	out := make([]error, len(e.Errors))
	for i, pe := range e.Errors {
		out[i] = pe
	}
	return out
}

// Check validates one manifest path. It returns nil or an *Error for the
// first rule the path breaks, in this order:
//
//  1. empty string: empty
//  2. contains "\": backslash
//  3. starts with "/": absolute
//  4. an ASCII letter then ":" at the start: drive_letter
//  5. any of < > : " | ? * or U+0000–U+001F or U+007F: invalid_characters
//     (so is text that is not UTF-8, which no JSON string can carry)
//  6. per segment, left to right: "" is empty_segment (a trailing "/"
//     too), ".." traversal, "." dot_segment, a final "." or space
//     trailing_dot_or_space, a Windows device name reserved_name.
func Check(p string) error {
	if c, seg := check(p); c != "" {
		return &Error{Path: p, Code: c, Segment: seg}
	}
	return nil
}

// check returns the broken rule and, for segment rules, the segment.
func check(p string) (Code, string) {
	switch {
	case p == "":
		return Empty, ""
	case strings.IndexByte(p, '\\') >= 0:
		return Backslash, ""
	case p[0] == '/':
		return Absolute, ""
	case len(p) >= 2 && isASCIILetter(p[0]) && p[1] == ':':
		return DriveLetter, ""
	case hasInvalidCharacter(p):
		return InvalidCharacters, ""
	}
	for rest := p; ; {
		seg, tail, more := strings.Cut(rest, "/")
		switch {
		case seg == "":
			return EmptySegment, seg
		case seg == "..":
			return Traversal, seg
		case seg == ".":
			return DotSegment, seg
		case seg[len(seg)-1] == '.' || seg[len(seg)-1] == ' ':
			return TrailingDotOrSpace, seg
		case isReserved(seg):
			return ReservedName, seg
		}
		if !more {
			return "", ""
		}
		rest = tail
	}
}

func isASCIILetter(b byte) bool { return b|0x20 >= 'a' && b|0x20 <= 'z' }

func hasInvalidCharacter(p string) bool {
	for i := 0; i < len(p); i++ {
		switch b := p[i]; {
		case b < 0x20, b == 0x7f:
			return true
		case b == '<', b == '>', b == ':', b == '"', b == '|', b == '?', b == '*':
			return true
		}
	}
	return !utf8.ValidString(p)
}

// reservedStems are the Windows device names; a segment is reserved when it
// is one of them, or one of them followed by "." and anything, compared
// without regard to ASCII case (COM0, LPT0, superscript digits, CONIN$ and
// "con .txt" are not reserved).
var reservedStems = []string{"con", "prn", "aux", "nul"}

func isReserved(seg string) bool {
	stem, _, _ := strings.Cut(seg, ".")
	switch len(stem) {
	case 3:
		for _, r := range reservedStems {
			if strings.EqualFold(stem, r) && isASCII(stem) {
				return true
			}
		}
	case 4:
		if !isASCII(stem) {
			return false
		}
		name := strings.ToLower(stem[:3])
		return (name == "com" || name == "lpt") && stem[3] >= '1' && stem[3] <= '9'
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// CheckSet validates every path of a set, in order, and returns nil or a
// *SetError listing every problem. A path that breaks a rule of Check is
// reported with that rule; a safe path that equals an earlier safe path when
// case is folded as JavaScript's toLowerCase folds it is a case_collision
// naming the earlier path. Exact duplicates are not collisions.
func CheckSet(paths []string) error {
	var errs []*Error
	seen := make(map[string]string, len(paths))
	for _, p := range paths {
		if c, seg := check(p); c != "" {
			errs = append(errs, &Error{Path: p, Code: c, Segment: seg})
			continue
		}
		folded := LowerJS(p)
		if earlier, dup := seen[folded]; dup {
			if earlier != p {
				errs = append(errs, &Error{Path: p, Code: CaseCollision, CollidesWith: earlier})
			}
			continue
		}
		seen[folded] = p
	}
	if len(errs) > 0 {
		return &SetError{Errors: errs}
	}
	return nil
}

// Join validates p and returns it as a native path under root, its
// segments joined with the operating system's separator.
func Join(root, p string) (string, error) {
	if err := Check(p); err != nil {
		return "", err
	}
	return filepath.Join(root, filepath.FromSlash(p)), nil
}

// EscapeError reports a path that resolves outside its root.
type EscapeError struct {
	Root, Path string
}

func (e *EscapeError) Error() string {
	return fmt.Sprintf("path %q escapes root %s", e.Path, e.Root)
}

// Is makes errors.Is(err, ErrUnsafe) true.
func (e *EscapeError) Is(target error) bool { return target == ErrUnsafe }

// Within resolves candidate (relative to root, or absolute) with every
// symbolic link followed, and returns the real path when it lies inside
// root's real path. A path that leaves root, directly or through a link, is
// an *EscapeError. Links are resolved on the deepest part of the path that
// exists, so a link cannot hide behind a component not created yet.
func Within(root, candidate string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("pathsafe: resolving root: %w", err)
	}
	realRoot, err = filepath.Abs(realRoot)
	if err != nil {
		return "", fmt.Errorf("pathsafe: resolving root: %w", err)
	}
	target := candidate
	if !filepath.IsAbs(target) {
		target = filepath.Join(realRoot, target)
	}
	real, err := evalDeepest(filepath.Clean(target))
	if err != nil {
		return "", fmt.Errorf("pathsafe: resolving %q: %w", candidate, err)
	}
	if real != realRoot && !strings.HasPrefix(real, strings.TrimSuffix(realRoot, string(filepath.Separator))+string(filepath.Separator)) {
		return "", &EscapeError{Root: root, Path: candidate}
	}
	return real, nil
}

// evalDeepest resolves links on the longest existing prefix of target and
// appends the rest unchanged.
func evalDeepest(target string) (string, error) {
	var suffix []string
	probe := target
	for {
		real, err := filepath.EvalSymlinks(probe)
		if err == nil {
			for i := len(suffix) - 1; i >= 0; i-- {
				real = filepath.Join(real, suffix[i])
			}
			return real, nil
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			return "", err
		}
		suffix = append(suffix, filepath.Base(probe))
		probe = parent
	}
}
