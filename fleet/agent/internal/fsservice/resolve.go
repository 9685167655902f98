package fsservice

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// target is a request path that passed the containment check.
type target struct {
	rootReal string // the root, realpath'd
	rel      string // the target relative to rootReal; "." is the root
	shown    string // the path as the request gave it, for messages
}

// resolve applies reference 1.16's containment rule to p: the root is
// realpath'd; p is resolved against it (an absolute p stays absolute); the
// deepest existing ancestor is realpath'd and the missing tail re-appended;
// the result must be the root or lie under root + separator.
func (s *Service) resolve(p string) (target, error) {
	root, err := filepath.Abs(s.root)
	if err != nil {
		return target{}, errorf(CodeNotFound, "root %s: %v", s.root, err)
	}
	rootReal, err := filepath.EvalSymlinks(root)
	if err != nil {
		return target{}, errorf(CodeNotFound, "root %s: %v", s.root, pathErrText(err))
	}
	cand := filepath.Clean(p)
	if !filepath.IsAbs(p) {
		cand = filepath.Join(rootReal, p)
	}
	real := realpathExisting(cand)
	if !within(rootReal, real) {
		return target{}, errorf(CodePathEscape, "path escapes root: %s", p)
	}
	rel, err := filepath.Rel(rootReal, real)
	if err != nil { // cannot happen for a path within rootReal
		return target{}, errorf(CodePathEscape, "path escapes root: %s", p)
	}
	return target{rootReal: rootReal, rel: rel, shown: p}, nil
}

// realpathExisting realpaths the deepest ancestor of the clean, absolute
// path p that resolves, and re-appends the tail that does not exist.
func realpathExisting(p string) string {
	var tail []string
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{real}, tail...)...)
		}
		parent := filepath.Dir(cur)
		if parent == cur { // even the volume root does not resolve
			return p
		}
		tail = append([]string{filepath.Base(cur)}, tail...)
		cur = parent
	}
}

// within reports whether p is root or lies under root + separator.
func within(root, p string) bool {
	if p == root {
		return true
	}
	prefix := root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(p, prefix)
}

// openRoot opens the realpath'd root as an os.Root, through which the
// target is then opened. rel holds no symlinks (it comes from a realpath),
// so the os.Root never has to follow one — not even an absolute link that
// the reference accepts because it points inside the root; it only
// refuses a symlink swapped in after the containment check.
func (t target) openRoot() (*os.Root, error) {
	r, err := os.OpenRoot(t.rootReal)
	if err != nil {
		return nil, osError(err, t.shown)
	}
	return r, nil
}

// osError classifies a filesystem error: missing → not_found, anything
// else → io_error.
func osError(err error, shown string) *Error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return errorf(CodeNotFound, "not found: %s", shown)
	}
	return errorf(CodeIOError, "%s: %v", shown, pathErrText(err))
}

// pathErrText is the OS reason of a *fs.PathError without the path, which
// the caller names itself.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
