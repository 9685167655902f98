package bundle

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"example.com/pifleet/bundle/pathsafe"
	"example.com/pifleet/internal/jsjson"
)

// MaxManifestBytes bounds the manifest text a reader accepts (about
// 500,000 files).
const MaxManifestBytes = 64 << 20

// ParseManifest reads and validates a manifest. It
// returns
//
//   - a *ManifestError (errors.Is CodeInvalidManifest) listing every
//     problem when the text is not JSON or breaks the schema;
//   - an *UnsafePathsError (errors.Is CodeUnsafePath) listing every file
//     path that breaks the path-safety rules, case collisions included.
//
// Beyond the TypeScript pi-fleet's schema, it also refuses what would make a
// content-addressed cache lie: a bundleHash that does not match the files,
// a path listed twice, and a size that is not a whole number of bytes.
// Properties the schema does not know are allowed and kept in Raw.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestBytes {
		return nil, &ManifestError{Problems: []FieldError{{Field: "(manifest)", Reason: fmt.Sprintf("larger than %d bytes", MaxManifestBytes)}}}
	}
	doc, canonical, err := jsjson.ParseCanonical(data)
	if err != nil {
		return nil, &ManifestError{Problems: []FieldError{{Field: "(manifest)", Reason: err.Error()}}}
	}
	var raw []byte
	if canonical {
		raw = bytes.Clone(data) // already what re-encoding would give
	}
	return manifestFromValue(&doc, raw)
}

func manifestFromValue(doc *jsjson.Value, raw []byte) (*Manifest, error) {
	s := &schema{}
	if !s.object("(manifest)", doc) {
		return nil, &ManifestError{Problems: s.problems}
	}
	m := &Manifest{Metadata: s.metadata(doc)}
	if v, ok := doc.Get("v"); !ok {
		s.fail("v", "is required")
	} else if v.Kind != jsjson.Number || v.Num != Version {
		s.fail("v", "must be 1")
	}
	if v, ok := doc.Get("name"); !ok {
		s.fail("name", "is required")
	} else if name, ok := s.str("name", v); ok {
		if name == "" {
			s.fail("name", "must not be empty")
		}
		m.Name = name
	}
	if v, ok := doc.Get("bundleHash"); !ok {
		s.fail("bundleHash", "is required")
	} else if h, ok := s.str("bundleHash", v); ok {
		if !isHex64(h) {
			s.fail("bundleHash", "must be 64 lowercase hex digits")
		}
		m.BundleHash = h
	}
	if v, ok := doc.Get("files"); !ok {
		s.fail("files", "is required")
	} else {
		m.Files = s.files(v)
	}
	if len(s.problems) > 0 {
		return nil, &ManifestError{Problems: s.problems}
	}
	if err := checkFiles(m); err != nil {
		return nil, err
	}
	if raw == nil {
		raw = jsjson.Append(nil, doc)
	}
	m.Raw = raw
	return m, nil
}

func (s *schema) files(v *jsjson.Value) []File {
	if v.Kind != jsjson.Array {
		s.fail("files", "must be an array, not "+v.Kind.String())
		return nil
	}
	files := make([]File, len(v.Items))
	// Field names are built only for problems: a manifest has thousands of
	// entries and usually none is wrong.
	for i := range v.Items {
		e := &v.Items[i]
		if e.Kind != jsjson.Object {
			s.fail(index("files", i), "must be an object, not "+e.Kind.String())
			continue
		}
		f := &files[i]
		var path, hash, size *jsjson.Value
		for j := range e.Members {
			switch m := &e.Members[j]; m.Key {
			case "path":
				path = &m.Value
			case "sha256":
				hash = &m.Value
			case "bytes":
				size = &m.Value
			}
		}
		switch {
		case path == nil:
			s.fail(index("files", i)+".path", "is required")
		case path.Kind != jsjson.String:
			s.fail(index("files", i)+".path", "must be a string, not "+path.Kind.String())
		default:
			f.Path = path.Str
		}
		switch {
		case hash == nil:
			s.fail(index("files", i)+".sha256", "is required")
		case hash.Kind != jsjson.String:
			s.fail(index("files", i)+".sha256", "must be a string, not "+hash.Kind.String())
		case !isHex64(hash.Str):
			s.fail(index("files", i)+".sha256", "must be 64 lowercase hex digits")
		default:
			f.SHA256 = hash.Str
		}
		switch {
		case size == nil:
			s.fail(index("files", i)+".bytes", "is required")
		case size.Kind != jsjson.Number:
			s.fail(index("files", i)+".bytes", "must be a number, not "+size.Kind.String())
		case size.Num < 0 || size.Num != math.Trunc(size.Num) || size.Num > 1<<53-1:
			s.fail(index("files", i)+".bytes", "must be a whole number of bytes")
		default:
			f.Bytes = int64(size.Num)
		}
	}
	return files
}

// checkFiles applies the rules that look at the file list as a whole:
// path safety, no path twice, and the bundleHash. It sorts the files.
func checkFiles(m *Manifest) error {
	paths := make([]string, len(m.Files))
	for i, f := range m.Files {
		paths[i] = f.Path
	}
	if err := pathsafe.CheckSet(paths); err != nil {
		return &UnsafePathsError{Err: err.(*pathsafe.SetError)}
	}
	sortFiles(m.Files)
	var problems []FieldError
	for i := 1; i < len(m.Files); i++ {
		if m.Files[i].Path == m.Files[i-1].Path {
			problems = append(problems, FieldError{Field: "files", Reason: "lists " + strconv.Quote(m.Files[i].Path) + " twice"})
		}
	}
	if len(problems) == 0 {
		if h := Hash(m.Files); h != m.BundleHash {
			problems = append(problems, FieldError{Field: "bundleHash", Reason: "does not match the files, which hash to " + h})
		}
	}
	if len(problems) > 0 {
		return &ManifestError{Problems: problems}
	}
	return nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !lowerHex[s[i]] {
			return false
		}
	}
	return true
}

var lowerHex = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()
