package cache

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"example.com/pifleet/bundle"
	"example.com/pifleet/internal/jsjson"
)

// PointerDir holds one pointer per bundle name: <root>/by-name/<name>.json.
const PointerDir = "by-name"

// Cache is the content-addressed bundle cache of a worker machine:
// <root>/<bundleHash>/ holds a complete version of a
// bundle, <root>/by-name/<name>.json says which version a name last synced
// to. A Cache is safe for concurrent use, also by several processes.
type Cache struct {
	root    string
	log     zerolog.Logger
	durable bool
}

// Option configures a Cache.
type Option func(*Cache)

// WithLogger logs what syncs do to log.
func WithLogger(log zerolog.Logger) Option {
	return func(c *Cache) { c.log = log.With().Str("component", "bundle-cache").Logger() }
}

// WithDurability chooses whether a sync flushes a new version to disk
// before it becomes visible (the default). Without it a crash of the
// process still never exposes a partial version, but a power loss may.
func WithDurability(durable bool) Option { return func(c *Cache) { c.durable = durable } }

// Open opens the cache at root, creating it if needed.
func Open(root string, opts ...Option) (*Cache, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	c := &Cache{root: abs, log: zerolog.Nop(), durable: true}
	for _, o := range opts {
		o(c)
	}
	if err := os.MkdirAll(filepath.Join(abs, PointerDir), 0o755); err != nil {
		return nil, fmt.Errorf("bundle cache: %w", err)
	}
	if err := spreadVersions(abs); err != nil {
		// Only a speed-up: file systems without directory attributes
		// (tmpfs, most non-ext4) refuse it.
		c.log.Debug().Err(err).Msg("cache root not marked as a top directory")
	}
	return c, nil
}

// DefaultRoot returns the cache root a worker uses: $PI_FLEET_CACHE, else
// ~/.pi/agent/fleet-cache.
func DefaultRoot() (string, error) {
	if root := os.Getenv("PI_FLEET_CACHE"); root != "" {
		return root, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("bundle cache: no PI_FLEET_CACHE and %w", err)
	}
	return filepath.Join(home, ".pi", "agent", "fleet-cache"), nil
}

// Root returns the cache's absolute root directory.
func (c *Cache) Root() string { return c.root }

// Dir returns the directory of a bundle version.
func (c *Cache) Dir(bundleHash string) string { return filepath.Join(c.root, bundleHash) }

// Pointer is the last version a bundle name was synced to.
type Pointer struct {
	BundleHash string
	Manifest   *bundle.Manifest
}

// Pointer reads the pointer of bundle name. It fails with fs.ErrNotExist
// when the name was never synced, and with a *bundle.ManifestError when
// the pointer file is damaged.
func (c *Cache) Pointer(name string) (*Pointer, error) {
	if err := bundle.ValidName(name); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(c.pointerPath(name))
	if err != nil {
		return nil, err
	}
	return parsePointer(data)
}

func (c *Cache) pointerPath(name string) string {
	return filepath.Join(c.root, PointerDir, name+".json")
}

// pointerBytes is a pointer as the TypeScript worker writes it:
// JSON.stringify({bundleHash, manifest}).
func pointerBytes(m *bundle.Manifest) []byte {
	raw := m.Raw
	if raw == nil {
		raw, _ = m.MarshalJSON()
	}
	b := make([]byte, 0, len(raw)+100)
	b = append(b, `{"bundleHash":`...)
	b = jsjson.AppendString(b, m.BundleHash)
	b = append(b, `,"manifest":`...)
	b = append(b, raw...)
	return append(b, '}')
}

// parsePointer reads a pointer. Pointers written by either implementation
// have the layout of pointerBytes, so the manifest is cut out and parsed
// once; anything else goes through a generic parse.
func parsePointer(data []byte) (*Pointer, error) {
	const head = `{"bundleHash":"`
	const mid = `","manifest":`
	var hash string
	var raw []byte
	if n := len(head) + 64 + len(mid); len(data) > n && bytes.HasPrefix(data, []byte(head)) &&
		bytes.Equal(data[len(head)+64:n], []byte(mid)) && data[len(data)-1] == '}' {
		hash, raw = string(data[len(head):len(head)+64]), data[n:len(data)-1]
	} else {
		doc, err := jsjson.Parse(data)
		if err != nil {
			return nil, pointerError("(pointer)", err.Error())
		}
		if doc.Kind != jsjson.Object {
			return nil, pointerError("(pointer)", "must be an object")
		}
		mv, ok := doc.Get("manifest")
		if !ok {
			return nil, pointerError("(pointer).manifest", "is required")
		}
		if hv, ok := doc.Get("bundleHash"); ok && hv.Kind == jsjson.String {
			hash = hv.Str
		}
		raw = jsjson.Append(nil, mv)
	}
	m, err := bundle.ParseManifest(raw)
	if err != nil {
		return nil, err
	}
	if hash != m.BundleHash {
		return nil, pointerError("(pointer).bundleHash", "differs from the manifest's")
	}
	return &Pointer{BundleHash: m.BundleHash, Manifest: m}, nil
}

func pointerError(field, reason string) error {
	return &bundle.ManifestError{Problems: []bundle.FieldError{{Field: field, Reason: reason}}}
}

// writePointer points name at m, atomically: a reader sees the old or the
// new pointer, whole. An identical pointer is left alone.
func (c *Cache) writePointer(st **stage, m *bundle.Manifest) error {
	path := c.pointerPath(m.Name)
	data := pointerBytes(m)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if *st == nil {
		s, err := c.newStage()
		if err != nil {
			return err
		}
		*st = s
	}
	tmp := (*st).pointerTemp()
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && c.durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil && c.durable {
		err = syncDir(filepath.Dir(path))
	}
	return err
}

// isDir reports whether path is a directory.
func isDir(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

// syncDir makes a directory's entries (a rename into it) durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return err
	}
	return nil
}
