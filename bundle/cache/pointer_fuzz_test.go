package cache

import (
	"bytes"
	"testing"

	"example.com/pifleet/bundle"
)

// FuzzParsePointer: a pointer file of any content is either refused with an
// error or yields a manifest whose own pointer reads back the same.
func FuzzParsePointer(f *testing.F) {
	m := &bundle.Manifest{Name: "b", Files: []bundle.File{{Path: "a.txt", SHA256: "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb", Bytes: 1}}}
	m.BundleHash = bundle.Hash(m.Files)
	f.Add(pointerBytes(m))
	f.Add([]byte(`{"manifest":{"v":1},"bundleHash":"x"}`))
	f.Add([]byte(`{"bundleHash":"` + m.BundleHash + `","manifest":}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parsePointer(data)
		if err != nil {
			return
		}
		if p.BundleHash != p.Manifest.BundleHash {
			t.Fatalf("pointer hash %s, manifest hash %s", p.BundleHash, p.Manifest.BundleHash)
		}
		again, err := parsePointer(pointerBytes(p.Manifest))
		if err != nil || again.BundleHash != p.BundleHash || !bytes.Equal(again.Manifest.Raw, p.Manifest.Raw) {
			t.Fatalf("rewritten pointer differs: %v", err)
		}
	})
}
