package serverstore

import (
	"bytes"
	"math"
	"testing"
)

// FuzzDecodeKey: the stored key parser accepts exactly the canonical
// encodings of valid keys, and never panics.
func FuzzDecodeKey(f *testing.F) {
	f.Add(DedupeKey{InstanceID: "i-1", TaskID: "t-1", Seq: 1_760_000_000_000}.encode())
	f.Add(DedupeKey{InstanceID: "i:1", TaskID: "t", Seq: math.Copysign(0, -1)}.encode())
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x00, 'a', 1, 'b', 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeKey(b)
		if err != nil {
			return
		}
		if err := k.check(); err != nil {
			t.Fatalf("decoded an invalid key %+v: %v", k, err)
		}
		if !bytes.Equal(k.encode(), b) {
			t.Fatalf("decodeKey accepted a non-canonical form %x of %+v", b, k)
		}
	})
}

// FuzzDedupeKeyRoundTrip: every valid key survives encode and decode, and
// two keys share a stored form only when they are the same key.
func FuzzDedupeKeyRoundTrip(f *testing.F) {
	f.Add("i-1", "t-1", 1.0, "i-1", "t-1", 2.0)
	f.Add("i:1", "t", 5.0, "i", "1:t", 5.0)
	f.Fuzz(func(t *testing.T, i1, t1 string, s1 float64, i2, t2 string, s2 float64) {
		a := DedupeKey{InstanceID: i1, TaskID: t1, Seq: s1}
		b := DedupeKey{InstanceID: i2, TaskID: t2, Seq: s2}
		if a.check() != nil || b.check() != nil {
			return
		}
		got, err := decodeKey(a.encode())
		if err != nil || got != a {
			t.Fatalf("round trip of %+v: %+v, %v", a, got, err)
		}
		if bytes.Equal(a.encode(), b.encode()) != (a == b) {
			t.Fatalf("%+v and %+v: equal stored forms %v, equal keys %v", a, b, bytes.Equal(a.encode(), b.encode()), a == b)
		}
	})
}
