package bundle

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"example.com/pifleet/bundle/pathsafe"
)

// Version is the manifest version this package reads and writes.
const Version = 1

// MetadataFile is the file at the root of a bundle source directory that
// holds its metadata. It describes the bundle and is not one of its files.
const MetadataFile = "bundle.json"

// File is one file of a bundle.
type File struct {
	// Path is the file's relative POSIX path, safe under package pathsafe.
	Path string
	// SHA256 is the SHA-256 of the content, 64 lowercase hex digits.
	SHA256 string
	// Bytes is the size of the content.
	Bytes int64
}

// ModelRef names a model: provider and id, with an optional thinking level.
type ModelRef struct {
	Provider string
	ID       string
	Thinking string // "" when absent
}

// ModelPolicy chooses a worker's model: the first of Primary, then
// Fallbacks, that the machine can use. Pin, when true, forbids changing
// the model at run time.
type ModelPolicy struct {
	Primary   ModelRef
	Fallbacks []ModelRef
	Pin       *bool
}

// Tools restricts the worker's active tools to Active (nil when absent).
type Tools struct {
	Active []string
}

// Review configures the review loop.
type Review struct {
	MaxRejects *float64
}

// Budget bounds a worker's run.
type Budget struct {
	MaxCost    *float64
	MaxTurns   *float64
	MaxMinutes *float64
}

// UI configures how a worker's UI requests are answered.
type UI struct {
	// AutoAnswer lists automatic answers in document order.
	AutoAnswer []AutoAnswer
}

// AutoAnswer answers the UI request Key: with the boolean *Bool when Bool
// is set, else with Text.
type AutoAnswer struct {
	Key  string
	Text string
	Bool *bool
}

// Metadata is what a bundle says about itself besides its files. It comes
// from the bundle.json of the source directory and is carried in the
// manifest. Nil fields are absent.
type Metadata struct {
	// Platforms lists the platforms the bundle runs on, in Node's names
	// (linux, darwin, win32); empty means all.
	Platforms []string
	// Extensions, Skills and Prompts are bundle paths (files, or
	// directories for skills and prompts) handed to pi.
	Extensions []string
	Skills     []string
	Prompts    []string
	Tools      *Tools
	Model      *ModelPolicy
	Review     *Review
	Budget     *Budget
	UI         *UI
}

// Manifest describes one version of a bundle.
// A Manifest is a value: once built or parsed it is not modified.
type Manifest struct {
	// Name is the bundle's name.
	Name string
	// BundleHash identifies the version: see Hash.
	BundleHash string
	// Files lists the bundle's files in UTF-16 order of their paths.
	Files []File
	Metadata

	// Raw is the compact JSON text ParseManifest read, re-serialised
	// exactly as JavaScript would (unknown properties included); it is nil
	// for a manifest made by Build, whose JSON is MarshalJSON's. Components
	// that pass a manifest on (the registry server, the cache's per-name
	// pointer) use Raw, so properties this package does not model survive
	// the trip.
	Raw []byte
}

// ValidName reports whether name can name a bundle: it is used in URLs and
// as a file name, so it must match ^[A-Za-z0-9][A-Za-z0-9._-]*$.
func ValidName(name string) error {
	if name == "" || !alnum(name[0]) {
		return &NameError{Name: name}
	}
	for i := 1; i < len(name); i++ {
		if c := name[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return &NameError{Name: name}
		}
	}
	return nil
}

func alnum(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z'
}

// Lookup returns the file with exactly this path.
func (m *Manifest) Lookup(path string) (File, bool) {
	i, ok := slices.BinarySearchFunc(m.Files, path, func(f File, p string) int { return CompareUTF16(f.Path, p) })
	if !ok {
		return File{}, false
	}
	return m.Files[i], true
}

// TotalBytes returns the size of all files.
func (m *Manifest) TotalBytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Bytes
	}
	return n
}

// Resources is what a worker is started with, resolved against the
// directory holding a bundle's files.
type Resources struct {
	// Extensions, Skills and Prompts are absolute native paths.
	Extensions []string
	Skills     []string
	Prompts    []string
	// Tools lists the tools to activate; nil leaves pi's default.
	Tools  []string
	Model  *ModelPolicy
	Budget *Budget
	Review *Review
	UI     *UI
}

// Resources resolves the manifest's resources under dir. A resource path
// that is not safe is an error.
func (m *Manifest) Resources(dir string) (Resources, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Resources{}, fmt.Errorf("bundle %s: %w", m.Name, err)
	}
	r := Resources{Model: m.Model, Budget: m.Budget, Review: m.Review, UI: m.UI}
	if m.Tools != nil {
		r.Tools = slices.Clone(m.Tools.Active)
	}
	for _, set := range []struct {
		field string
		in    []string
		out   *[]string
	}{
		{"extensions", m.Extensions, &r.Extensions},
		{"skills", m.Skills, &r.Skills},
		{"prompts", m.Prompts, &r.Prompts},
	} {
		for i, p := range set.in {
			native, err := pathsafe.Join(abs, p)
			if err != nil {
				return Resources{}, fmt.Errorf("bundle %s: %s[%d]: %w", m.Name, set.field, i, err)
			}
			*set.out = append(*set.out, native)
		}
	}
	return r, nil
}

// hasPath reports whether p names a file of the bundle, or a directory
// holding at least one.
func (m *Manifest) hasPath(p string) bool {
	if _, ok := m.Lookup(p); ok {
		return true
	}
	prefix := p + "/"
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, prefix) {
			return true
		}
	}
	return false
}
