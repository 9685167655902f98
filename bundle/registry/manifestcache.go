package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"sync"

	"example.com/pifleet/bundle"
)

// manifestCache keeps parsed manifest files until they change on disk.
// Publishing replaces manifest.json by renaming a new file over it, so a
// stat that shows the same file, size and modification time means the
// same manifest; parsing it again (milliseconds for thousands of files)
// is avoided on every request of a sync.
type manifestCache struct {
	mu      sync.Mutex
	entries map[string]*cachedManifest // by file path
}

// cachedManifest is one manifest.json as last read.
type cachedManifest struct {
	mu    sync.Mutex
	stamp os.FileInfo
	m     *bundle.Manifest // nil when the file was invalid
	etag  string           // quoted SHA-256 of m.Raw
	err   error            // why m is nil
}

type loadedManifest struct {
	m    *bundle.Manifest
	etag string
}

// load returns the manifest at path, parsing it only when it changed;
// fresh tells whether this call read the file.
func (c *manifestCache) load(path string) (_ loadedManifest, fresh bool, _ error) {
	fi, err := os.Stat(path)
	if err != nil {
		return loadedManifest{}, false, err
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = make(map[string]*cachedManifest)
	}
	e := c.entries[path]
	if e == nil {
		e = &cachedManifest{}
		c.entries[path] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stamp == nil || !sameVersion(e.stamp, fi) {
		fresh = true
		e.m, e.stamp, e.err = readManifest(path)
		if e.m != nil {
			sum := sha256.Sum256(e.m.Raw)
			e.etag = `"` + hex.EncodeToString(sum[:]) + `"`
		}
	}
	if e.m == nil {
		return loadedManifest{}, fresh, e.err
	}
	return loadedManifest{m: e.m, etag: e.etag}, fresh, nil
}

// readManifest reads and parses path and returns the identity of the file
// it actually read (the manifest may be replaced between a stat and a read).
func readManifest(path string) (*bundle.Manifest, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, bundle.MaxManifestBytes+1))
	if err != nil {
		return nil, nil, err
	}
	m, err := bundle.ParseManifest(data)
	if err != nil {
		return nil, fi, err
	}
	return m, fi, nil
}
