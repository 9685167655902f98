package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"example.com/pifleet/bundle"
)

// ManifestFile and FilesDir name the parts of a registry entry.
const (
	ManifestFile = "manifest.json"
	FilesDir     = "files"
)

// Entry summarises one published bundle.
type Entry struct {
	Name       string `json:"name"`
	BundleHash string `json:"bundleHash"`
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
	// Err is set, and the other fields are empty, when the entry's
	// manifest is missing or invalid.
	Err error `json:"-"`
}

// List returns the bundles of the registry at root, sorted by name.
// Directories that are not valid bundle names are ignored; an entry whose
// manifest cannot be read is listed with its Err set.
func List(root string) ([]Entry, error) {
	dirents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", root, err)
	}
	var out []Entry
	for _, d := range dirents {
		if !d.IsDir() || bundle.ValidName(d.Name()) != nil {
			continue
		}
		m, err := Show(root, d.Name())
		if err != nil {
			out = append(out, Entry{Name: d.Name(), Err: err})
			continue
		}
		out = append(out, Entry{Name: m.Name, BundleHash: m.BundleHash, Files: len(m.Files), Bytes: m.TotalBytes()})
	}
	slices.SortFunc(out, func(a, b Entry) int { return bundle.CompareUTF16(a.Name, b.Name) })
	return out, nil
}

// Show reads and validates the manifest of bundle name in the registry at
// root. A missing bundle is a *Error with code not_found, an invalid
// manifest one with code invalid_manifest.
func Show(root, name string) (*bundle.Manifest, error) {
	if err := bundle.ValidName(name); err != nil {
		return nil, err
	}
	return (&Dir{root: root, origin: root}).readManifest(name)
}

func manifestPath(root, name string) string {
	return filepath.Join(root, name, ManifestFile)
}
