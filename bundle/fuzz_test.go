package bundle_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle"
)

// FuzzParseManifest: whatever the input, parsing either fails with a
// typed error or yields a manifest whose Raw and whose typed encoding both
// parse back to the same manifest.
func FuzzParseManifest(f *testing.F) {
	files := []bundle.File{{Path: "a.txt", SHA256: sum("a"), Bytes: 1}, {Path: "sub/b.md", SHA256: sum("b"), Bytes: 1}}
	f.Add([]byte(validManifestJSON(f, files, `"skills":["sub"],"tools":{"active":["read"]},"ui":{"autoAnswer":{"q":true}},`)))
	f.Add([]byte(validManifestJSON(f, nil, `"model":{"primary":{"provider":"p","id":"i"},"pin":false},"budget":{"maxCost":1.5},`)))
	f.Add([]byte(`{"v":1,"name":"x","bundleHash":"00","files":[{"path":"../x","sha256":"00","bytes":1}]}`))
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := bundle.ParseManifest(data)
		if err != nil {
			if m != nil {
				t.Fatal("error with a manifest")
			}
			return
		}
		fromRaw, err := bundle.ParseManifest(m.Raw)
		if err != nil {
			t.Fatalf("Raw does not parse: %v\n%s", err, m.Raw)
		}
		if !bytes.Equal(fromRaw.Raw, m.Raw) {
			t.Fatalf("Raw is not stable:\n%s\n%s", m.Raw, fromRaw.Raw)
		}
		typed, _ := m.MarshalJSON()
		again, err := bundle.ParseManifest(typed)
		if err != nil {
			t.Fatalf("MarshalJSON output does not parse: %v\n%s", err, typed)
		}
		strip := func(m *bundle.Manifest) bundle.Manifest { c := *m; c.Raw = nil; return c }
		if d := cmp.Diff(strip(m), strip(again)); d != "" {
			t.Fatalf("typed round trip changed the manifest (-first +again):\n%s", d)
		}
		if _, err := bundle.ParseManifest(m.Encode()); err != nil {
			t.Fatalf("Encode output does not parse: %v", err)
		}
	})
}

// FuzzParseMetadata: a bundle.json either fails with named problems or
// round-trips through a manifest unchanged.
func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(`{"skills":["s"],"model":{"primary":{"provider":"p","id":"i","thinking":"low"}},"ui":{"autoAnswer":{"a":"b"}}}`))
	f.Add([]byte(`{"skils":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := bundle.ParseMetadata(data)
		if err != nil {
			if me, ok := err.(*bundle.MetadataError); !ok || len(me.Problems) == 0 {
				t.Fatalf("error %v is not a MetadataError with problems", err)
			}
			return
		}
		m := &bundle.Manifest{Name: "x", BundleHash: bundle.Hash(nil), Files: []bundle.File{}, Metadata: md}
		typed, _ := m.MarshalJSON()
		again, err := bundle.ParseManifest(typed)
		if err != nil {
			t.Fatalf("manifest with valid metadata does not parse: %v\n%s", err, typed)
		}
		if d := cmp.Diff(md, again.Metadata); d != "" {
			t.Fatalf("metadata changed through a manifest (-bundle.json +manifest):\n%s", d)
		}
	})
}
