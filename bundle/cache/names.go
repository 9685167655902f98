package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"example.com/pifleet/bundle"
)

// Names lists the bundle names the cache holds a pointer for
// (<root>/by-name/<name>.json), sorted. A file there whose name is not a
// valid bundle name followed by ".json" is not a pointer and is left out;
// a pointer listed may still be damaged (Pointer and VerifyBundle say so).
// An empty cache, or one whose pointer directory was removed, has none.
func (c *Cache) Names() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(c.root, PointerDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bundle cache: listing bundles: %w", err)
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || bundle.ValidName(name) != nil {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names) // ReadDir sorts by file name; the suffix cut can reorder ("a.b" < "a")
	return names, nil
}
