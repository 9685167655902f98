package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"example.com/pifleet/bundle/pathsafe"
	"example.com/pifleet/internal/jsjson"
)

// metadataKeys are the keys a bundle.json may hold. The name is not one of
// them: it is given when publishing.
var metadataKeys = []string{"platforms", "extensions", "skills", "prompts", "tools", "model", "review", "budget", "ui"}

// ParseMetadata reads a bundle.json document. It is strict where a
// manifest is lenient: a key it does not know, at any depth, is an error
// naming the key, because a typo in hand-written metadata ("skils") would
// otherwise silently change the bundle. Every problem is reported, in a
// *MetadataError.
func ParseMetadata(data []byte) (Metadata, error) {
	doc, err := jsjson.Parse(data)
	if err != nil {
		return Metadata{}, &MetadataError{Problems: []FieldError{{Field: "(bundle.json)", Reason: err.Error()}}}
	}
	if doc.Kind != jsjson.Object {
		return Metadata{}, &MetadataError{Problems: []FieldError{{Field: "(bundle.json)", Reason: "must be an object, not " + doc.Kind.String()}}}
	}
	s := &schema{strict: true}
	s.object("", &doc, metadataKeys...)
	for i := range s.problems {
		if p := &s.problems[i]; p.Field == "name" {
			p.Reason = "unknown key (the bundle's name is given when publishing)"
		}
	}
	md := s.metadata(&doc)
	for _, l := range []struct {
		field string
		paths []string
	}{{"extensions", md.Extensions}, {"skills", md.Skills}, {"prompts", md.Prompts}} {
		for i, p := range l.paths {
			if err := pathsafe.Check(p); err != nil {
				s.fail(index(l.field, i), err.Error())
			}
		}
	}
	if len(s.problems) > 0 {
		return Metadata{}, &MetadataError{Problems: s.problems}
	}
	return md, nil
}

// ReadMetadata reads dir/bundle.json. A directory without one has empty
// metadata.
func ReadMetadata(dir string) (Metadata, error) {
	file := filepath.Join(dir, MetadataFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return Metadata{}, nil
	}
	if err != nil {
		return Metadata{}, fmt.Errorf("reading bundle metadata: %w", err)
	}
	md, err := ParseMetadata(data)
	var me *MetadataError
	if errors.As(err, &me) {
		me.File = file
	}
	return md, err
}

// checkResources verifies that every resource path of md names a file of
// m, or (for skills and prompts) a directory holding some.
func checkResources(md *Metadata, m *Manifest) []FieldError {
	var problems []FieldError
	for _, l := range []struct {
		field   string
		paths   []string
		dirOK   bool
		explain string
	}{
		{"extensions", md.Extensions, false, "is not a file of the bundle"},
		{"skills", md.Skills, true, "is not a file or directory of the bundle"},
		{"prompts", md.Prompts, true, "is not a file or directory of the bundle"},
	} {
		for i, p := range l.paths {
			if err := pathsafe.Check(p); err != nil {
				problems = append(problems, FieldError{Field: index(l.field, i), Reason: err.Error()})
				continue
			}
			_, isFile := m.Lookup(p)
			if !isFile && !(l.dirOK && m.hasPath(p)) {
				problems = append(problems, FieldError{Field: index(l.field, i), Reason: fmt.Sprintf("%q %s", p, l.explain)})
			}
		}
	}
	return problems
}
