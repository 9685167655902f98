package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/pathsafe"
)

// PublishOptions tunes Publish.
type PublishOptions struct {
	// Build tunes the manifest build.
	Build bundle.BuildOptions
}

// Publish builds the manifest of the source directory src (its
// bundle.json gives the metadata) and publishes it in the registry at root
// as bundle name: every file is copied to <root>/<name>/files/<path>, then
// manifest.json is replaced.
//
// Each file and the manifest are written to a temporary file and renamed
// into place, so a server reading the registry meanwhile sees either the
// old or the new content of a file, never part of one, and switches
// versions when the manifest is renamed. Files the previous version
// already holds with the same content are not copied again; files it held
// that the new one lacks stay (the manifest is the allow-list). A source
// file that changes while it is published is an error: the registry would
// otherwise serve bytes that do not match the manifest.
func Publish(root, name, src string, opts PublishOptions) (*bundle.Manifest, error) {
	m, err := bundle.BuildDir(src, name, opts.Build)
	if err != nil {
		return nil, err
	}
	entry := filepath.Join(root, name)
	files := filepath.Join(entry, FilesDir)
	var previous *bundle.Manifest
	if data, err := os.ReadFile(manifestPath(root, name)); err == nil {
		previous, _ = bundle.ParseManifest(data) // an invalid old manifest just means: copy everything
	}
	for _, f := range m.Files {
		dst, err := pathsafe.Join(files, f.Path)
		if err != nil {
			return nil, err // cannot happen: Build checked every path
		}
		if previous != nil && unchanged(previous, f, dst) {
			continue
		}
		from := filepath.Join(src, filepath.FromSlash(f.Path))
		if err := copyVerified(from, dst, f); err != nil {
			return nil, fmt.Errorf("publishing bundle %s: %w", name, err)
		}
	}
	if err := writeAtomic(manifestPath(root, name), m.Encode()); err != nil {
		return nil, fmt.Errorf("publishing bundle %s: %w", name, err)
	}
	return m, nil
}

// unchanged reports whether dst already holds f, as published before.
func unchanged(previous *bundle.Manifest, f bundle.File, dst string) bool {
	old, ok := previous.Lookup(f.Path)
	if !ok || old.SHA256 != f.SHA256 {
		return false
	}
	fi, err := os.Lstat(dst)
	return err == nil && fi.Mode().IsRegular() && fi.Size() == f.Bytes
}

// copyVerified copies from to dst through a temporary file, checking that
// the bytes are those of f.
func copyVerified(from, dst string, f bundle.File) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".publish-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this fails harmlessly
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 || n != f.Bytes {
		return fmt.Errorf("%s changed while it was published", from)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// writeAtomic replaces path with data: written and flushed to a temporary
// file, then renamed over path.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".manifest-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// isNotExist reports a missing file, whichever way the OS says it.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
