package bundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"example.com/pifleet/bundle/internal/filehash"
	"example.com/pifleet/bundle/pathsafe"
)

// BuildOptions tunes Build.
type BuildOptions struct {
	// Workers hash files in parallel while the tree is walked; 0 means
	// GOMAXPROCS (the files are read from the page cache, so system calls
	// are CPU work too: more workers than CPUs would only add switches).
	Workers int
}

// Build walks the source directory dir and returns the manifest of its
// files, named name, with metadata md.
//
// Only regular files count: symbolic links (to files or directories) and
// special files are skipped, and the bundle.json at the root is the
// metadata, not a file. Paths are POSIX, files are in UTF-16 order of
// their paths, so the same directory gives a byte-identical manifest on
// every platform. A path that breaks the path-safety rules aborts the
// build (*UnsafePathsError), and so does a resource of md that names
// nothing in the bundle (*MetadataError).
func Build(dir, name string, md Metadata, opts BuildOptions) (*Manifest, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// The walk feeds the hashers as it finds each directory's files, so
	// that listing the tree and hashing it overlap.
	h := filehash.NewHasher(workers)
	var rel []string                // POSIX paths, in walk order
	var results [][]filehash.Result // per directory with files, in walk order
	walkErr := walk(dir, "", func(prefix string, d filehash.Dir) {
		for _, n := range d.Names {
			if prefix != "" {
				n = prefix + "/" + n
			}
			rel = append(rel, n)
		}
		results = append(results, h.Add(d))
	})
	// The paths are checked while the hashers finish their last files.
	var pathErr error
	if walkErr == nil {
		pathErr = pathsafe.CheckSet(rel)
	}
	hashErr := h.Wait()
	if walkErr != nil {
		return nil, fmt.Errorf("bundle %s: walking %s: %w", name, dir, walkErr)
	}
	if pathErr != nil {
		return nil, &UnsafePathsError{Err: pathErr.(*pathsafe.SetError)}
	}
	if hashErr != nil {
		return nil, fmt.Errorf("bundle %s: %w", name, hashErr)
	}
	m := &Manifest{Name: name, Metadata: md, Files: make([]File, 0, len(rel))}
	for _, rs := range results {
		for _, r := range rs {
			p := rel[len(m.Files)]
			m.Files = append(m.Files, File{Path: p, SHA256: r.SHA256, Bytes: r.Bytes})
		}
	}
	sortFiles(m.Files)
	m.BundleHash = Hash(m.Files)
	if problems := checkResources(&md, m); len(problems) > 0 {
		return nil, &MetadataError{File: filepath.Join(dir, MetadataFile), Problems: problems}
	}
	return m, nil
}

// walk lists the regular files under dir/prefix and calls found with each
// directory that has some, with the directory's POSIX path ("" for dir).
func walk(dir, prefix string, found func(prefix string, d filehash.Dir)) error {
	native := filepath.Join(dir, filepath.FromSlash(prefix))
	f, err := os.Open(native)
	if err != nil {
		return err
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	d := filehash.Dir{Path: native}
	var subdirs []string
	for _, e := range entries {
		switch t := e.Type(); {
		case t.IsDir():
			subdirs = append(subdirs, e.Name())
		case t.IsRegular():
			if prefix != "" || e.Name() != MetadataFile {
				d.Names = append(d.Names, e.Name())
			}
		}
	}
	// Sorted here, the files usually come out in manifest order, and the
	// final sort only checks it.
	slices.SortFunc(d.Names, CompareUTF16)
	slices.SortFunc(subdirs, CompareUTF16)
	if len(d.Names) > 0 {
		found(prefix, d)
	}
	for _, sub := range subdirs {
		p := sub
		if prefix != "" {
			p = prefix + "/" + sub
		}
		if err := walk(dir, p, found); err != nil {
			return err
		}
	}
	return nil
}

// BuildDir reads dir's bundle.json and builds its manifest: the usual way
// to turn a source directory into a bundle.
func BuildDir(dir, name string, opts BuildOptions) (*Manifest, error) {
	md, err := ReadMetadata(dir)
	if err != nil {
		return nil, err
	}
	m, err := Build(dir, name, md, opts)
	if err != nil {
		var me *MetadataError
		if errors.As(err, &me) && me.File == "" {
			me.File = filepath.Join(dir, MetadataFile)
		}
	}
	return m, err
}
