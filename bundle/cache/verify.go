package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"sort"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/internal/filehash"
)

// Verify re-hashes the cached copy of manifest m and reports, in a
// *CorruptError, every file that is missing, not a regular file, of the
// wrong content, or not in the manifest. A version that is not cached is
// an error matching fs.ErrNotExist. It is what doctor runs.
func (c *Cache) Verify(m *bundle.Manifest) error {
	dir := c.Dir(m.BundleHash)
	if ok, err := isDir(dir); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("bundle %q version %s is not cached: %w", m.Name, m.BundleHash, fs.ErrNotExist)
	}
	want := make(map[string]bundle.File, len(m.Files))
	for _, f := range m.Files {
		want[f.Path] = f
	}
	var problems []Problem
	var paths []string
	var files []bundle.File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		f, listed := want[rel]
		switch {
		case !listed:
			problems = append(problems, Problem{Path: rel, Reason: "not in the manifest"})
		case !d.Type().IsRegular():
			problems = append(problems, Problem{Path: rel, Reason: "not a regular file"})
			delete(want, rel)
		default:
			paths = append(paths, p)
			files = append(files, f)
			delete(want, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("verifying bundle %q: %w", m.Name, err)
	}
	for p := range want {
		problems = append(problems, Problem{Path: p, Reason: "missing"})
	}
	filehash.Each(paths, runtime.GOMAXPROCS(0), func(i int, r filehash.Result, err error) bool {
		switch {
		case err != nil:
			problems = append(problems, Problem{Path: files[i].Path, Reason: err.Error()})
		case r.Bytes != files[i].Bytes:
			problems = append(problems, Problem{Path: files[i].Path, Reason: fmt.Sprintf("%d bytes, the manifest says %d", r.Bytes, files[i].Bytes)})
		case r.SHA256 != files[i].SHA256:
			problems = append(problems, Problem{Path: files[i].Path, Reason: "content does not match its hash"})
		}
		return true
	})
	if len(problems) == 0 {
		return nil
	}
	sort.Slice(problems, func(i, j int) bool { return bundle.CompareUTF16(problems[i].Path, problems[j].Path) < 0 })
	return &CorruptError{Bundle: m.Name, BundleHash: m.BundleHash, Dir: dir, Problems: problems}
}

// VerifyBundle verifies the version bundle name points at.
func (c *Cache) VerifyBundle(name string) error {
	p, err := c.Pointer(name)
	if err != nil {
		return fmt.Errorf("bundle %q: %w", name, err)
	}
	if p.Manifest.Name != name {
		return errors.New("bundle " + name + ": pointer names bundle " + p.Manifest.Name)
	}
	return c.Verify(p.Manifest)
}
