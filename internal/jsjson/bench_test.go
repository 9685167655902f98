package jsjson_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"example.com/pifleet/internal/jsjson"
)

// manifestLike is the shape the parser is tuned for: 2,000 file entries.
func manifestLike() []byte {
	var b strings.Builder
	b.WriteString(`{"v":1,"name":"bench","bundleHash":"` + strings.Repeat("0", 64) + `","files":[`)
	for i := range 2000 {
		if i > 0 {
			b.WriteByte(',')
		}
		h := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		fmt.Fprintf(&b, `{"path":"dir%02d/file%04d.txt","sha256":"%s","bytes":4096}`, i/100, i, hex.EncodeToString(h[:]))
	}
	b.WriteString("]}")
	return []byte(b.String())
}

func BenchmarkParseManifest(b *testing.B) {
	data := manifestLike()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jsjson.Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendManifest(b *testing.B) {
	v, err := jsjson.Parse(manifestLike())
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = jsjson.Append(buf[:0], &v)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkParseManifestStd is BenchmarkParseManifest with encoding/json
// decoding into an any, for comparison.
func BenchmarkParseManifestStd(b *testing.B) {
	data := manifestLike()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendManifestStd is BenchmarkAppendManifest with encoding/json
// encoding the same document decoded into an any, for comparison.
func BenchmarkAppendManifestStd(b *testing.B) {
	var v any
	if err := json.Unmarshal(manifestLike(), &v); err != nil {
		b.Fatal(err)
	}
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if out, err = json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(out)))
}
