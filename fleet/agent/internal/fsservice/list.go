package fsservice

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"example.com/pifleet/transport"
)

func (s *Service) list(p string, res *transport.FsResultFrame) error {
	t, err := s.resolve(p)
	if err != nil {
		return err
	}
	root, err := t.openRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Stat(t.rel)
	if err != nil {
		return osError(err, t.shown)
	}
	if !fi.IsDir() {
		return errorf(CodeNotFound, "not a directory: %s", t.shown)
	}
	dir, err := root.Open(t.rel)
	if err != nil {
		return osError(err, t.shown)
	}
	defer dir.Close()
	des, err := dir.ReadDir(-1)
	if err != nil {
		return osError(err, t.shown)
	}
	slices.SortFunc(des, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	entries := make([]transport.FsEntry, 0, len(des)) // [] on the wire for an empty directory
	for _, de := range des {
		e := transport.FsEntry{Name: de.Name(), Kind: transport.FsFile}
		if de.IsDir() { // from the directory entry itself: a symlink is a file
			e.Kind = transport.FsDir
		}
		if size, ok := entrySize(t, de); ok {
			e.Bytes = &size
		}
		entries = append(entries, e)
	}
	res.Entries = entries
	return nil
}

// entrySize is the size of a directory entry, following a symlink the way
// the reference's stat does, but only to a target inside the root: a link
// leading out gets no size rather than leaking its target's.
func entrySize(t target, de fs.DirEntry) (float64, bool) {
	if de.Type()&fs.ModeSymlink == 0 {
		info, err := de.Info()
		if err != nil {
			return 0, false
		}
		return float64(info.Size()), true
	}
	real, err := filepath.EvalSymlinks(filepath.Join(t.rootReal, t.rel, de.Name()))
	if err != nil || !within(t.rootReal, real) {
		return 0, false
	}
	info, err := os.Stat(real)
	if err != nil {
		return 0, false
	}
	return float64(info.Size()), true
}
